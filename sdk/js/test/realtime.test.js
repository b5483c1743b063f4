// The realtime client against real chatd nodes sharing one Redis:
// cross-node delivery, reconnect after a node is killed or drained with
// no gap and no duplicate, and the close codes that must stop it.

import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import {ChatdClient, RealtimeClient, ChatdError, ErrorCodes, CloseReasons, CloseCodes} from '../src/index.js';
import {cluster, admin, uniqueName, eventually} from './harness.js';
import {WebSocket as WsWebSocket} from 'ws';

/** @type {Awaited<ReturnType<typeof cluster>>} */
let c;
/** @type {RealtimeClient[]} */
const clients = [];
before(async () => {
  c = await cluster(2);
  // the fault tests stream says faster than the default 10 a second
  await admin(c.nodes[0], 'PUT', '/settings/rate.messages_per_second', {value: 1000});
});
after(async () => {
  for (const rt of clients) rt.close();
  await c?.stop();
});

/**
 * user signs a new guest in on node and makes its realtime client.
 * @param {import('./harness.js').Node} node
 * @param {Partial<import('../src/index.js').RealtimeOptions>} [o]
 */
async function user(node, o = {}) {
  const api = new ChatdClient({baseUrl: node.url});
  await api.signIn(uniqueName());
  const rt = api.realtime({backoff: {base: 200, max: 1000}, ...o});
  clients.push(rt);
  /** @type {import('../src/index.js').Message[]} */
  const messages = [];
  rt.on('message', (d) => messages.push(d.message));
  /** @type {import('../src/index.js').RealtimeEventMap['disconnected'][]} */
  const drops = [];
  rt.on('disconnected', (d) => drops.push(d));
  /** @type {import('../src/index.js').RealtimeEventMap['closed'][]} */
  const closes = [];
  rt.on('closed', (d) => closes.push(d));
  return {api, rt, messages, drops, closes, name: /** @type {string} */ (api.user)};
}

test('say, ack and delivery across nodes; presence, typing, read marks, ping; a REST poller sees the says', {timeout: 60000}, async () => {
  const [a, b] = c.nodes;
  const x = await user(a);
  const y = await user(b);
  const hx = await x.rt.connect();
  assert.equal(hx.node, 'a');
  assert.equal(hx.user, x.name);
  assert.equal(hx.reconnected, false);
  assert.equal((await y.rt.connect()).node, 'b');
  const lobby = uniqueName('lob');
  const room = await x.rt.join(lobby);
  const presence = x.rt.once('presence', {filter: (p) => p.user === y.name && p.state === 'joined'});
  const roomY = await y.rt.join(lobby);
  assert.equal(roomY.id, room.id);
  await presence;

  const poller = new ChatdClient({baseUrl: a.url});
  await poller.signIn(uniqueName());
  await poller.join(lobby);
  await poller.poll();

  const ack = await x.rt.say(room.id, 'hello from a');
  assert.equal(ack.room, room.id);
  assert.match(ack.id, /^\d{13}-\d{6}$/);
  assert.match(ack.ref, /^c[0-9a-f]{12}-\d+$/);
  await eventually(() => y.messages.some((m) => m.id === ack.id && m.text === 'hello from a' && m.from === x.name), 5000, 'delivery on node b');
  await eventually(() => x.messages.some((m) => m.id === ack.id), 5000, 'the sender sees its message');

  const typing = x.rt.once('typing', {filter: (t) => t.room === room.id});
  assert.equal(y.rt.typing(room.id), true);
  assert.equal(y.rt.typing(room.id), false, 'one typing frame per room per 2 s');
  assert.equal((await typing).user, y.name);

  assert.equal((await y.api.unread())[room.id], 1);
  y.rt.read(room.id, ack.id);
  await eventually(async () => (await y.api.unread())[room.id] === 0, 5000, 'read mark');

  const elsewhere = await poller.join(uniqueName('lob'));
  const refused = await x.rt.say(elsewhere.id, 'not seated there').then(() => null, (e) => e);
  assert.ok(refused instanceof ChatdError);
  assert.equal(refused.code, ErrorCodes.NOT_SEATED);
  assert.ok(refused.ref);
  const tooBig = await x.rt.say(room.id, 'x'.repeat(70000)).then(() => null, (e) => e);
  assert.equal(tooBig?.code, 'frame_too_large');

  assert.ok((await x.rt.ping()) >= 0);

  const polled = await poller.poll({wait: 5});
  assert.ok(polled.dirty.includes('messages'));
  assert.ok(polled.data.messages?.[room.id]?.some((m) => m.id === ack.id));

  await y.rt.leave(room.id);
  await eventually(() => x.rt.rooms().find((r) => r.room.id === room.id)?.room, 1000, 'room state');
  assert.deepEqual(y.rt.rooms(), []);
  assert.equal(x.rt.rooms()[0].lastId, ack.id);
});

test('unbatched, with the WebSocket constructor given explicitly (the ws package\'s, as on Node 20)', {timeout: 30000}, async () => {
  const api = new ChatdClient({baseUrl: c.nodes[0].url});
  await api.signIn(uniqueName());
  const rt = new RealtimeClient({url: c.nodes[0].ws, token: /** @type {string} */ (api.token), WebSocket: /** @type {any} */ (WsWebSocket), batch: false});
  clients.push(rt);
  await rt.connect();
  const room = await rt.join(uniqueName('lob'));
  const acks = await Promise.all([1, 2, 3].map((i) => rt.say(room.id, `n${i}`)));
  assert.deepEqual(acks.map((a) => a.id), [...acks.map((a) => a.id)].sort(), 'acks in the order of the says');
  rt.close();
  assert.equal(rt.state, 'closed');
  const after = await rt.say(room.id, 'late').then(() => null, (e) => e);
  assert.equal(after?.code, 'closed');
});

/**
 * streamThroughFault joins a listener (first on `dying`, then anywhere)
 * and two senders — one on the survivor, one on the dying node — to one
 * room, has both send while fault() hits the dying node, and checks that
 * the listener delivered exactly the room's history: no gap, no
 * duplicate, in order.
 * @param {import('./harness.js').Node} dying
 * @param {() => Promise<unknown>} fault
 * @param {string} reason the close reason the listener must see
 */
async function streamThroughFault(dying, fault, reason) {
  const survivor = c.nodes[1];
  const listener = await user(dying, {url: [dying.ws, survivor.ws]});
  const steady = await user(survivor);
  const moving = await user(dying, {url: [dying.ws, survivor.ws]});
  await Promise.all([listener.rt.connect(), steady.rt.connect(), moving.rt.connect()]);
  const lobby = uniqueName('lob');
  const room = await listener.rt.join(lobby);
  await steady.rt.join(lobby);
  await moving.rt.join(lobby);
  let reopenAt = 0;
  const reopened = listener.rt.once('open', {filter: (h) => h.reconnected}).then((h) => {
    reopenAt = Date.now();
    return h;
  });
  const N = 120;
  /** @type {Promise<import('../src/index.js').Ack>[]} */
  const says = [];
  let faulted = false;
  let dropAt = 0;
  listener.rt.on('disconnected', () => {
    dropAt = Date.now();
  });
  for (let i = 0; i < N; i++) {
    says.push(steady.rt.say(room.id, `s${i}`));
    says.push(moving.rt.say(room.id, `m${i}`));
    if (i === N / 3 && !faulted) {
      faulted = true;
      void fault();
    }
    await new Promise((r) => setTimeout(r, 8));
  }
  const acks = await Promise.all(says);
  const hello = await reopened;
  const reopenMs = reopenAt - dropAt;
  assert.equal(hello.node, 'b', 'the listener moved to the surviving node');
  assert.equal(listener.drops[0]?.reason, reason);
  assert.equal(listener.drops[0]?.willReconnect, true);

  const api = steady.api;
  const last = acks.map((a) => a.id).sort().at(-1);
  await eventually(() => listener.messages.at(-1)?.id === last, 15000, 'the listener caught up');
  const history = (await api.history(room.id, {limit: 1000})).map((m) => m.id);
  const got = listener.messages.map((m) => m.id);
  assert.equal(new Set(got).size, got.length, 'no duplicate');
  assert.deepEqual(got, history, 'exactly the room\'s history, in order: no gap');
  for (const a of acks) assert.ok(history.includes(a.id), `acked ${a.id} is stored`);
  const texts = (await api.history(room.id, {limit: 1000})).map((m) => m.text);
  for (let i = 0; i < N; i++) {
    assert.equal(texts.filter((t) => t === `s${i}`).length, 1, `s${i} once`);
    assert.ok(texts.includes(`m${i}`), `m${i} stored`);
  }
  return {
    reopenMs,
    resent: moving.rt.stats.resent,
    // says of the moving sender stored twice: the ref was re-sent after its
    // first copy was stored but before the ack came back (the server's ref
    // dedup makes this 0)
    doubled: N - new Set(texts.filter((t) => t.startsWith('m'))).size + texts.filter((t) => t.startsWith('m')).length - N,
    seamDuplicates: listener.rt.stats.duplicates,
  };
}

test('a node killed (SIGKILL): clients move to the other node and resume with no gap and no duplicate', {timeout: 90000}, async (t) => {
  const dying = await c.add('k');
  const r = await streamThroughFault(dying, () => dying.kill('SIGKILL'), CloseReasons.NETWORK);
  t.diagnostic(`reconnected ${r.reopenMs} ms after the kill; ${r.resent} says re-sent, ${r.doubled} stored twice; ${r.seamDuplicates} dropped at the seam`);
});

test('a node drained (SIGTERM → 1012): clients reconnect at once and resume with no gap and no duplicate', {timeout: 90000}, async (t) => {
  const dying = await c.add('d');
  const r = await streamThroughFault(dying, () => dying.kill('SIGTERM'), CloseReasons.DRAINING);
  t.diagnostic(`reconnected ${r.reopenMs} ms after the 1012; ${r.resent} says re-sent, ${r.doubled} stored twice; ${r.seamDuplicates} dropped at the seam`);
});

test('kicked (4001): closed with reason kicked, no reconnect; connect() comes back into the room', {timeout: 30000}, async () => {
  const x = await user(c.nodes[0]);
  await x.rt.connect();
  const room = await x.rt.join(uniqueName('lob'));
  const ack = await x.rt.say(room.id, 'before the kick');
  const moderated = x.rt.once('moderation');
  await admin(c.nodes[0], 'POST', '/moderation/kick', {user: x.name, reason: 'cool off'});
  await eventually(() => x.closes.length === 1, 5000, 'closed');
  assert.deepEqual(x.closes[0], {code: CloseCodes.KICKED, reason: CloseReasons.KICKED, text: 'cool off', mayReconnect: true});
  assert.deepEqual(await moderated, {action: 'kicked', text: 'cool off'});
  assert.equal(x.drops.at(-1)?.willReconnect, false);
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(x.rt.state, 'closed');
  assert.equal(x.rt.stats.connections, 1, 'no reconnect after a kick');

  const rejoined = x.rt.once('joined');
  assert.equal((await x.rt.connect()).reconnected, true);
  const j = await rejoined;
  assert.equal(j.room.id, room.id);
  assert.equal(j.resumed, true);
  const again = await x.rt.say(room.id, 'after the kick');
  assert.ok(again.id > ack.id);
});

test('banned (4003): closed for good; a later connect() learns the ban over HTTP and stays closed', {timeout: 30000}, async () => {
  const x = await user(c.nodes[0]);
  await x.rt.connect();
  await x.rt.join(uniqueName('lob'));
  const pending = x.rt.say('nowhere-1', 'x').catch((e) => e); // answered before the ban
  await pending;
  await admin(c.nodes[0], 'POST', '/moderation/ban', {user: x.name, seconds: 60});
  try {
    await eventually(() => x.closes.length === 1, 5000, 'closed');
    assert.equal(x.closes[0].code, CloseCodes.BANNED);
    assert.equal(x.closes[0].reason, CloseReasons.BANNED);
    assert.equal(x.closes[0].mayReconnect, false);
    const err = await x.rt.connect().then(() => null, (e) => e);
    assert.ok(err instanceof ChatdError, String(err));
    assert.equal(x.closes.length, 2);
    assert.equal(x.closes[1].reason, CloseReasons.BANNED, 'the refused open was explained by the probe');
    assert.equal(x.rt.stats.connections, 1);
  } finally {
    await admin(c.nodes[0], 'DELETE', `/moderation/ban/${x.name}`);
  }
});

test('signed out (4000): session_ended, no reconnect; a bad token ends at the first open', {timeout: 30000}, async () => {
  const x = await user(c.nodes[1]);
  await x.rt.connect();
  const room = await x.rt.join(uniqueName('lob'));
  const sent = x.rt.say(room.id, 'last words');
  await sent;
  await x.api.signOut();
  await eventually(() => x.closes.length === 1, 5000, 'closed');
  assert.equal(x.closes[0].code, CloseCodes.SESSION_ENDED);
  assert.equal(x.closes[0].reason, CloseReasons.SESSION_ENDED);
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(x.rt.stats.connections, 1);
  assert.equal(x.rt.state, 'closed');

  const api = new ChatdClient({baseUrl: c.nodes[0].url, token: 'not-a-token'});
  const rt = api.realtime();
  clients.push(rt);
  const closed = rt.once('closed');
  const err = await rt.connect().then(() => null, (e) => e);
  assert.equal(err?.code, 'closed');
  assert.equal((await closed).reason, CloseReasons.SESSION_ENDED);
});
