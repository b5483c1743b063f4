// The SSE transport against real chatd nodes sharing one Redis: a client
// on the stream chats with a WebSocket client on another node, resumes
// every room from Last-Event-ID after its node is killed (no gap, no
// duplicate), and the realtime client falls back to it when WebSocket
// upgrades are refused.

import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import {ChatdClient, RealtimeClient, ChatdError, CloseCodes, CloseReasons, sseTransport} from '../src/index.js';
import {cluster, admin, uniqueName, eventually} from './harness.js';

/** @type {Awaited<ReturnType<typeof cluster>>} */
let c;
/** @type {RealtimeClient[]} */
const clients = [];
before(async () => {
  c = await cluster(2);
  await admin(c.nodes[0], 'PUT', '/settings/rate.messages_per_second', {value: 1000});
});
after(async () => {
  for (const rt of clients) rt.close();
  await c?.stop();
});

/**
 * user signs a new guest in at baseUrl and makes its realtime client.
 * @param {string} baseUrl
 * @param {Partial<import('../src/index.js').RealtimeOptions>} [o]
 */
async function user(baseUrl, o = {}) {
  const api = new ChatdClient({baseUrl});
  await api.signIn(uniqueName());
  const rt = api.realtime({backoff: {base: 200, max: 1000}, ...o});
  clients.push(rt);
  /** @type {import('../src/index.js').Message[]} */
  const messages = [];
  rt.on('message', (d) => messages.push(d.message));
  return {api, rt, messages, name: /** @type {string} */ (api.user)};
}

test('over SSE: hello, join, say and ack, delivery both ways with a WebSocket user on another node, read marks, leave, ping', {timeout: 60000}, async () => {
  const [a, b] = c.nodes;
  const x = await user(a.url, {transport: sseTransport()});
  const y = await user(b.url);
  const hx = await x.rt.connect();
  assert.equal(hx.node, 'a');
  assert.equal(hx.transport, 'sse');
  assert.equal(x.rt.transport, 'sse');
  assert.equal((await y.rt.connect()).transport, 'websocket');

  const lobby = uniqueName('lob');
  const room = await x.rt.join(lobby);
  assert.equal(room.lobby, lobby);
  const presence = x.rt.once('presence', {filter: (p) => p.user === y.name && p.state === 'joined'});
  assert.equal((await y.rt.join(lobby)).id, room.id);
  await presence;

  const ack = await x.rt.say(room.id, 'from the stream');
  assert.equal(ack.room, room.id);
  assert.match(ack.id, /^\d{13}-\d{6}$/);
  await eventually(() => y.messages.some((m) => m.id === ack.id && m.text === 'from the stream' && m.from === x.name), 5000, 'delivery to the WebSocket user on b');
  await eventually(() => x.messages.some((m) => m.id === ack.id), 5000, 'the stream delivers the sender its own message');
  const back = await y.rt.say(room.id, 'from the websocket');
  await eventually(() => x.messages.some((m) => m.id === back.id && m.text === 'from the websocket'), 5000, 'delivery over the stream');
  assert.deepEqual(x.messages.map((m) => m.id), [ack.id, back.id], 'each message once, in order');

  const typed = y.rt.once('typing', {filter: (e) => e.user === x.name && e.room === room.id, signal: AbortSignal.timeout(15000)});
  assert.equal(x.rt.typing(room.id), true, 'typing goes over HTTP');
  await typed; // the WebSocket user on b sees the stream user typing
  assert.equal((await x.api.unread())[room.id], 2);
  x.rt.read(room.id, back.id);
  await eventually(async () => (await x.api.unread())[room.id] === 0, 5000, 'the read mark went over HTTP');
  assert.equal(typeof await x.rt.ping(), 'number');

  const refused = await x.rt.say(`${uniqueName('zz')}-1`, 'nowhere').then(() => null, (e) => e);
  assert.ok(refused instanceof ChatdError, String(refused));
  assert.notEqual(refused.code, 'closed');

  const left = y.rt.once('presence', {filter: (p) => p.user === x.name && p.state === 'left'});
  await x.rt.leave(room.id);
  await left;
  assert.deepEqual(x.rt.rooms(), []);
  assert.equal(x.rt.stats.connections, 1);
});

test('over SSE, the stream\'s node killed: the client reopens on the other node and resumes from Last-Event-ID with no gap and no duplicate', {timeout: 90000}, async () => {
  const dying = await c.add('k');
  const b = c.nodes[1];
  const x = await user(dying.url, {transport: sseTransport(), url: [dying.ws, b.ws]});
  const y = await user(b.url);
  await x.rt.connect();
  await y.rt.connect();
  const lobby = uniqueName('lob');
  const room = await x.rt.join(lobby);
  await y.rt.join(lobby);
  const sent = [];
  for (let i = 0; i < 10; i++) sent.push((await y.rt.say(room.id, `m${i}`)).id);
  await eventually(() => x.messages.length === 10, 5000, 'the first ten over the stream');
  const drop = x.rt.once('disconnected');
  await dying.kill('SIGKILL');
  await drop;
  for (let i = 10; i < 20; i++) sent.push((await y.rt.say(room.id, `m${i}`)).id);
  await eventually(() => x.messages.length >= 20, 20000, 'the missed ten after the reopen');
  assert.equal(x.rt.hello.node, 'b');
  assert.equal(x.rt.transport, 'sse');
  await x.rt.ping(); // anything more would have come before the pong's turn
  assert.deepEqual(x.messages.map((m) => m.id), sent, 'every message once, in order, across the seam');
  assert.equal(x.rt.stats.duplicates, 0, 'the reopened stream started at the position (Last-Event-ID): it replayed nothing delivered already');
  const after = await x.rt.say(room.id, 'still seated');
  assert.ok(after.id > sent[19]);
});

test('over SSE: a matched event on the stream, and enter(room) takes the match room\'s seat with POST /rooms/{room}/join; the players chat there', {timeout: 60000}, async () => {
  const [a, b] = c.nodes;
  const queue = uniqueName('q');
  await admin(a, 'PUT', '/settings/matchmaking.queues', {
    value: JSON.stringify({[queue]: {min: 2, max: 2, window: 100, widen_per_second: 20, max_wait_seconds: 60, max_party: 1, reserve_seconds: 30}}),
  });
  const x = await user(a.url, {transport: sseTransport()});
  const y = await user(b.url);
  await x.rt.connect();
  await y.rt.connect();
  const lobbyRoom = await x.rt.join(uniqueName('lob'));
  const mx = x.rt.once('matched');
  const my = y.rt.once('matched');
  const tx = await x.api.request('POST', `/matchmaking/${queue}/tickets`, {body: {skill: 1000}});
  await y.api.request('POST', `/matchmaking/${queue}/tickets`, {body: {skill: 1000}});
  const [ex, ey] = await Promise.all([mx, my]);
  assert.equal(ex.ticket, tx.ticket.id);
  assert.equal(ex.room, ey.room);
  assert.deepEqual([...(ex.players ?? [])].sort(), [x.name, y.name].sort());
  const roomId = /** @type {string} */ (ex.room);

  await x.rt.leave(lobbyRoom.id);
  const rx = await x.rt.enter(roomId);
  assert.equal(rx.id, roomId);
  assert.equal((await y.rt.enter(roomId)).id, roomId);
  assert.deepEqual(x.rt.rooms().map((r) => r.room.id), [roomId]);
  assert.equal((await x.rt.enter(roomId)).id, roomId, 'a room the client is in resolves at once');

  const hi = await x.rt.say(roomId, 'glhf');
  await eventually(() => y.messages.some((m) => m.id === hi.id), 5000, 'the WebSocket player reads the stream\'s');
  const back = await y.rt.say(roomId, 'gg');
  await eventually(() => x.messages.some((m) => m.id === back.id && m.text === 'gg'), 5000, 'the stream delivers the match room');

  const err = await x.rt.enter(`${uniqueName('mm.zz')}-1`).then(() => null, (e) => e);
  assert.ok(err instanceof ChatdError, String(err));
  assert.notEqual(err.code, 'closed');
  assert.equal(x.rt.stats.connections, 1);
});

/**
 * refusingProxy forwards HTTP to node and answers every WebSocket upgrade
 * with 403, like a network that breaks upgrades.
 * @param {import('./harness.js').Node} node
 */
async function refusingProxy(node) {
  let upgrades = 0;
  const server = http.createServer((req, res) => {
    const up = http.request({host: '127.0.0.1', port: node.port, path: req.url, method: req.method, headers: req.headers}, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  server.on('upgrade', (_req, socket) => {
    upgrades++;
    socket.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const {port} = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${port}`,
    upgrades: () => upgrades,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

test('fallback: WebSocket upgrades refused, the client moves to SSE and chats; with upgrades allowed it stays on the WebSocket', {timeout: 60000}, async () => {
  const [a, b] = c.nodes;
  const proxy = await refusingProxy(a);
  try {
    const x = await user(proxy.url, {fallback: sseTransport()});
    const y = await user(b.url, {fallback: sseTransport()});
    const hx = await x.rt.connect();
    assert.equal(hx.transport, 'sse');
    assert.equal(x.rt.transport, 'sse');
    assert.ok(proxy.upgrades() >= 1, 'the WebSocket was tried first');
    assert.equal((await y.rt.connect()).transport, 'websocket', 'no fallback when the upgrade works');
    const lobby = uniqueName('lob');
    const room = await x.rt.join(lobby);
    await y.rt.join(lobby);
    const ack = await x.rt.say(room.id, 'through the proxy');
    await eventually(() => y.messages.some((m) => m.id === ack.id), 5000, 'the WebSocket user gets it');
    const back = await y.rt.say(room.id, 'hello back');
    await eventually(() => x.messages.some((m) => m.id === back.id), 5000, 'the SSE user gets the answer');
    assert.equal(x.rt.stats.connections, 1);
  } finally {
    proxy.close();
  }
});

test('over SSE, a refused open ends like the WebSocket would: a bad token is session_ended', {timeout: 30000}, async () => {
  const rt = new RealtimeClient({url: c.nodes[0].ws, token: 'not-a-token', transport: sseTransport()});
  clients.push(rt);
  const closed = rt.once('closed');
  const err = await rt.connect().then(() => null, (e) => e);
  assert.ok(err instanceof ChatdError, String(err));
  const info = await closed;
  assert.equal(info.code, CloseCodes.SESSION_ENDED);
  assert.equal(info.reason, CloseReasons.SESSION_ENDED);
  assert.equal(rt.stats.connections, 0);
});
