// Unit tests of the SDK's own logic, where no server can make the case
// happen on demand: the backoff's bounds, id order, header parsing, the
// close-code table, batched frame splitting, and the seam: a replay that
// overlaps what was delivered (the server never sends one, so a scripted
// transport plays it) must not reach the application twice; when the
// realtime client gives up its main transport for the fallback; entering
// a room by id (enter) and the matchmaking events; and which resumes the
// SSE transport turns into POST /rooms/{room}/join.

import {test} from 'node:test';
import assert from 'node:assert/strict';
import {
  RealtimeClient, backoffDelay, compareIds, normalizeId, closeReasonOf, CloseReasons, newIdempotencyKey,
  webSocketTransport, sseTransport, ChatdError,
} from '../src/index.js';
import {retryAfterSeconds, waitFromMessage} from '../src/errors.js';

test('backoff: full jitter under a doubling ceiling, capped', () => {
  assert.equal(backoffDelay(0, {random: () => 0}), 0);
  assert.equal(backoffDelay(0, {random: () => 0.999999}), 499);
  assert.equal(backoffDelay(3, {random: () => 0.5}), 2000);
  assert.equal(backoffDelay(50, {random: () => 0.5, max: 15000}), 7500);
  for (let i = 0; i < 1000; i++) {
    const d = backoffDelay(2);
    assert.ok(d >= 0 && d < 2000);
  }
});

test('message ids: padded, ordered as the server orders them', () => {
  assert.equal(normalizeId('1796114764962-1'), '1796114764962-000001');
  assert.equal(compareIds('1796114764962-1', '1796114764962-000001'), 0);
  assert.ok(compareIds('1796114764962-000009', '1796114764962-000010') < 0);
  assert.ok(compareIds('1796114764963-000000', '1796114764962-999999') > 0);
  assert.match(newIdempotencyKey(), /^k-[0-9a-f]{32}$/);
});

test('Retry-After and a rate_limited message\'s wait', () => {
  assert.equal(retryAfterSeconds('3'), 3);
  assert.equal(retryAfterSeconds(new Date(10_000).toUTCString(), 4_000), 6);
  assert.equal(retryAfterSeconds('soon'), undefined);
  assert.equal(retryAfterSeconds(null), undefined);
  assert.equal(waitFromMessage('you are sending too fast; wait 1.5 s'), 1.5);
  assert.equal(waitFromMessage('nope'), undefined);
  assert.equal(new ChatdError({code: 'rate_limited', message: '', status: 429}).retryable, true);
  assert.equal(new ChatdError({code: 'bad_name', message: '', status: 400}).retryable, false);
});

test('close codes: reasons and what to do next', () => {
  /** @type {[number, string, string][]} */
  const want = [
    [1000, CloseReasons.NORMAL, 'backoff'], [1006, CloseReasons.NETWORK, 'backoff'], [1008, CloseReasons.POLICY, 'later'],
    [1009, CloseReasons.TOO_BIG, 'backoff'], [1011, CloseReasons.INTERNAL, 'backoff'], [1012, CloseReasons.DRAINING, 'now'],
    [1013, CloseReasons.TRY_LATER, 'later'], [4000, CloseReasons.SESSION_ENDED, 'never'], [4001, CloseReasons.KICKED, 'ask'],
    [4003, CloseReasons.BANNED, 'never'], [4999, CloseReasons.UNKNOWN, 'backoff'],
  ];
  for (const [code, reason, policy] of want) assert.deepEqual(closeReasonOf(code), {reason, policy}, String(code));
});

/**
 * A WebSocket stand-in that delivers the frames it is given, for the
 * transport's splitting.
 */
class FrameSocket {
  /** @param {string} url */
  constructor(url) {
    this.url = url;
    this.readyState = 1;
    /** @type {((ev: any) => void) | null} */ this.onopen = null;
    /** @type {((ev: any) => void) | null} */ this.onmessage = null;
    /** @type {((ev: any) => void) | null} */ this.onclose = null;
    /** @type {((ev: any) => void) | null} */ this.onerror = null;
    FrameSocket.last = this;
  }

  send() {}

  close() {}
}
/** @type {FrameSocket | undefined} */
FrameSocket.last = undefined;

test('transport: ?token=…&batch=1, frames split on newlines, junk lines dropped', () => {
  const open = webSocketTransport({WebSocket: /** @type {any} */ (FrameSocket)});
  /** @type {any[]} */
  const got = [];
  open({url: 'ws://h/ws', token: 'a b', handlers: {open() {}, event: (e) => got.push(e), close() {}}});
  const ws = /** @type {FrameSocket} */ (FrameSocket.last);
  assert.equal(ws.url, 'ws://h/ws?token=a%20b&batch=1');
  ws.onmessage?.({data: '{"type":"a"}\n{"type":"b","x":"line\\nbreak"}\n\nnot json\n{"no":"type"}\n'});
  assert.deepEqual(got, [{type: 'a'}, {type: 'b', x: 'line\nbreak'}]);
  open({url: 'ws://h/ws?x=1', token: 't', handlers: {open() {}, event() {}, close() {}}});
  assert.equal(/** @type {FrameSocket} */ (FrameSocket.last).url, 'ws://h/ws?x=1&token=t&batch=1');
});

/**
 * scripted is a TransportFactory whose connections the test drives: it
 * records the frames the client sends and lets the test push events and
 * closes.
 */
function scripted() {
  /** @type {{sent: any[], handlers: import('../src/index.js').TransportHandlers, url: string, rooms?: {room: string, after?: string}[]}[]} */
  const conns = [];
  /** @type {import('../src/index.js').TransportFactory} */
  const factory = ({url, handlers, rooms}) => {
    const conn = {sent: /** @type {any[]} */ ([]), handlers, url, rooms};
    conns.push(conn);
    return {send: (f) => (conn.sent.push(f), true), close() {}};
  };
  return {factory, conns};
}

/** @param {string} room @param {number} n */
const msg = (room, n) => ({type: 'message', message: {id: `1796114764962-${String(n).padStart(6, '0')}`, room, from: 'x', text: `t${n}`, ts: ''}});

test('seam: a replay overlapping what was delivered is dropped by id; unacked says go again with their ref', async () => {
  const {factory, conns} = scripted();
  const rt = new RealtimeClient({url: ['ws://a/ws', 'ws://b/ws'], token: 't', transport: factory, backoff: {base: 1, max: 1}, pingInterval: 0});
  /** @type {string[]} */
  const ids = [];
  rt.on('message', (d) => ids.push(d.message.id));
  const ready = rt.connect();
  await new Promise((r) => setTimeout(r, 0));
  const c1 = conns[0];
  assert.equal(c1.url, 'ws://a/ws');
  c1.handlers.event({type: 'hello', user: 'x', node: 'a', motd: ''});
  await ready;
  const joined = rt.join('lob');
  assert.equal(c1.sent[0].type, 'join');
  c1.handlers.event({type: 'joined', room: {id: 'lob-1', lobby: 'lob', seq: 1, capacity: 50, members: ['x']}});
  assert.equal((await joined).id, 'lob-1');
  for (const n of [1, 2, 3]) c1.handlers.event(msg('lob-1', n));
  const say = rt.say('lob-1', 'in flight');
  const ref = c1.sent.at(-1).ref;
  c1.handlers.close({code: 1006, reason: ''});

  await new Promise((r) => setTimeout(r, 20));
  const c2 = conns[1];
  assert.equal(c2.url, 'ws://b/ws', 'the next URL of the list');
  c2.handlers.event({type: 'hello', user: 'x', node: 'b', motd: ''});
  assert.deepEqual(c2.sent.map((f) => f.type), ['resume', 'say']);
  assert.equal(c2.sent[0].after, '1796114764962-000003');
  assert.equal(c2.sent[1].ref, ref, 'the same ref');
  c2.handlers.event({type: 'joined', room: {id: 'lob-1', lobby: 'lob', seq: 1, capacity: 50, members: ['x']}});
  for (const n of [2, 3, 4, 5]) c2.handlers.event(msg('lob-1', n)); // overlapping replay
  c2.handlers.event({type: 'ack', ref, id: '1796114764962-000004', room: 'lob-1'});
  assert.equal((await say).id, '1796114764962-000004');
  assert.deepEqual(ids.map((i) => Number(i.split('-')[1])), [1, 2, 3, 4, 5]);
  assert.equal(rt.stats.duplicates, 2);
  assert.equal(rt.stats.resent, 1);

  const gap = rt.once('resume_gap');
  c2.handlers.event({type: 'error', code: 'resume_gap', message: 'gone', room: 'lob-1'});
  assert.equal((await gap).room, 'lob-1');
  rt.close();
});

test('fallback: after fallbackAfter failed opens in a row before the main transport ever worked, the fallback takes over and stays, with the rooms\' positions; an outage after the main transport worked does not fall back', async () => {
  const main = scripted();
  const fb = scripted();
  /** @param {() => boolean} cond */
  const until = async (cond) => {
    for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
    assert.ok(cond(), String(cond));
  };
  const hello = {type: 'hello', user: 'x', node: 'a', motd: ''};
  const room = {id: 'lob-1', lobby: 'lob', seq: 1, capacity: 50, members: ['x']};
  const rt = new RealtimeClient({
    url: 'ws://a/ws', token: 't', transport: Object.assign(main.factory, {kind: 'websocket'}),
    fallback: Object.assign(fb.factory, {kind: 'sse'}), fallbackAfter: 2, backoff: {base: 1, max: 1}, pingInterval: 0,
  });
  /** @type {string[]} */
  const opened = [];
  rt.on('open', (h) => opened.push(h.transport));

  // The main transport works, then an outage: every open fails, and the
  // client keeps to the main transport.
  let ready = rt.connect();
  await until(() => main.conns.length === 1);
  main.conns[0].handlers.event(hello);
  await ready;
  assert.equal(rt.transport, 'websocket');
  main.conns[0].handlers.close({code: 1006, reason: ''});
  for (let n = 2; n <= 4; n++) {
    await until(() => main.conns.length + fb.conns.length === n);
    main.conns[n - 1].handlers.close({code: 1006, reason: 'refused'});
  }
  await until(() => main.conns.length + fb.conns.length === 5);
  assert.equal(fb.conns.length, 0, 'an outage after the main transport worked is retried on it');
  rt.close();

  // From the start, the main transport never reaches hello.
  ready = rt.connect();
  await until(() => main.conns.length === 6);
  main.conns[5].handlers.close({code: 1006, reason: 'refused'}); // failed open 1 of 2
  await until(() => main.conns.length + fb.conns.length === 7);
  assert.equal(main.conns.length, 7, 'one failed open is not enough with fallbackAfter 2');
  main.conns[6].handlers.close({code: 1006, reason: 'refused'}); // failed open 2 of 2
  await until(() => main.conns.length + fb.conns.length === 8);
  assert.equal(fb.conns.length, 1, 'the fallback opens');
  fb.conns[0].handlers.event(hello);
  assert.equal((await ready).transport, 'sse');
  assert.equal(rt.transport, 'sse');
  const joined = rt.join('lob');
  fb.conns[0].handlers.event({type: 'joined', room});
  await joined;
  fb.conns[0].handlers.event(msg('lob-1', 7));
  fb.conns[0].handlers.close({code: 1006, reason: ''});
  await until(() => main.conns.length + fb.conns.length === 9);
  assert.equal(fb.conns.length, 2, 'it stays on the fallback');
  assert.deepEqual(fb.conns[1].rooms, [{room: 'lob-1', after: '1796114764962-000007'}], 'with the last message delivered in each room');
  fb.conns[1].handlers.event(hello);
  assert.deepEqual(opened, ['websocket', 'sse', 'sse']);

  rt.close();
  const again = rt.connect();
  await until(() => main.conns.length + fb.conns.length === 10);
  assert.equal(main.conns.length, 8, 'connect() after close starts on the main transport');
  main.conns[7].handlers.event(hello);
  assert.equal((await again).transport, 'websocket');
  rt.close();
});

test('enter: a resume without after, resolved by the room\'s joined, rejected by an error with its ref, sent again after a reconnect; matched and ticket_expired are typed events', async () => {
  const {factory, conns} = scripted();
  const rt = new RealtimeClient({url: 'ws://a/ws', token: 't', transport: factory, backoff: {base: 1, max: 1}, pingInterval: 0});
  /** @param {() => boolean} cond */
  const until = async (cond) => {
    for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
    assert.ok(cond(), String(cond));
  };
  const hello = {type: 'hello', user: 'x', node: 'a', motd: ''};
  const ready = rt.connect();
  await until(() => conns.length === 1);
  const c1 = conns[0];
  c1.handlers.event(hello);
  await ready;

  /** @type {import('../src/index.js').MatchEvent[]} */
  const matched = [];
  rt.on('matched', (m) => matched.push(m));
  const expired = rt.once('ticket_expired');
  /** @type {any[]} */
  const unknown = [];
  rt.on('unknown', (e) => unknown.push(e));
  const ev = {type: 'matched', queue: 'quick', ticket: 'T1', match: 'quick-7', room: 'mm.quick.7-1', players: ['x', 'y'], reserve_seconds: 30, ts: 1};
  c1.handlers.event(ev);
  assert.deepEqual(matched, [ev]);
  c1.handlers.event({type: 'ticket_expired', queue: 'quick', ticket: 'T2', ts: 2});
  assert.equal((await expired).ticket, 'T2');
  c1.handlers.event({type: 'queued', ticket: {id: 'T3'}});
  assert.deepEqual(unknown.map((e) => e.type), ['queued'], 'only the events the SDK does not know');

  const room = {id: 'mm.quick.7-1', lobby: 'mm.quick.7', seq: 1, capacity: 2, members: ['x']};
  const entered = rt.enter(room.id);
  const f = c1.sent.at(-1);
  assert.equal(f.type, 'resume');
  assert.equal(f.room, room.id);
  assert.equal('after' in f, false, 'no after: the seat is taken, the latest messages follow');
  assert.equal(typeof f.ref, 'string');
  const joined = rt.once('joined');
  c1.handlers.event({type: 'joined', room});
  assert.deepEqual(await entered, room);
  assert.equal((await joined).resumed, false);
  assert.deepEqual(rt.rooms(), [{room, lastId: undefined}]);
  const n = c1.sent.length;
  assert.deepEqual(await rt.enter(room.id), room, 'a room the client is in resolves at once');
  assert.equal(c1.sent.length, n, 'with no frame');

  const refused = rt.enter('mm.quick.8-1');
  const rf = c1.sent.at(-1);
  c1.handlers.event({type: 'error', code: 'forbidden', message: 'not one of its players', ref: rf.ref, room: 'mm.quick.8-1'});
  const err = await refused.then(() => null, (e) => e);
  assert.ok(err instanceof ChatdError);
  assert.equal(err.code, 'forbidden');
  assert.equal(err.ref, rf.ref);
  assert.deepEqual(rt.rooms().map((r) => r.room.id), [room.id]);

  // An enter not answered when the connection drops is sent again on the next.
  const pending = rt.enter('mm.quick.9-1');
  const pref = c1.sent.at(-1).ref;
  c1.handlers.close({code: 1006, reason: ''});
  await until(() => conns.length === 2);
  const c2 = conns[1];
  assert.deepEqual(c2.rooms, [{room: room.id}], 'the room entered is resumed by the transport');
  c2.handlers.event(hello);
  // the room followed, with no message yet, resumes from its start (without
  // after it would be a join: the latest 50); the pending enter has none
  assert.deepEqual(c2.sent.map((x) => [x.type, x.room, x.after]), [['resume', room.id, '0-0'], ['resume', 'mm.quick.9-1', undefined]]);
  assert.equal(c2.sent[1].ref, pref, 'with its ref');
  const r9 = {...room, id: 'mm.quick.9-1', lobby: 'mm.quick.9'};
  c2.handlers.event({type: 'joined', room});
  c2.handlers.event({type: 'joined', room: r9});
  assert.deepEqual(await pending, r9);

  const lost = rt.enter('mm.quick.10-1');
  rt.close();
  assert.equal((await lost.then(() => null, (e) => e))?.code, 'closed', 'close rejects a pending enter');
});

test('sse: a resume without after of a room the stream does not follow is POST /rooms/{room}/join; the rooms it follows are not joined again', async () => {
  const enc = new TextEncoder();
  /** @type {ReadableStreamDefaultController<Uint8Array> | undefined} */
  let stream;
  /** @type {{method: string, path: string, auth: string | null}[]} */
  const calls = [];
  /** @type {string | null} */
  let lastEventID = null;
  /** @type {typeof fetch} */
  const fakeFetch = async (input, init) => {
    const u = new URL(String(input));
    const headers = new Headers(init?.headers);
    if (u.pathname === '/api/v1/events') {
      lastEventID = headers.get('Last-Event-ID');
      return new Response(new ReadableStream({start(c) { stream = c; }}), {status: 200, headers: {'Content-Type': 'text/event-stream'}});
    }
    const method = init?.method ?? 'GET';
    calls.push({method, path: u.pathname, auth: headers.get('Authorization')});
    if (u.pathname === '/api/v1/rooms/mm.quick.8-1/join') {
      return Response.json({error: {code: 'forbidden', message: 'not one of its players'}}, {status: 403});
    }
    const m = /^\/api\/v1\/rooms\/([^/]+)\/join$/.exec(u.pathname);
    if (m) return Response.json({room: {id: m[1], lobby: m[1].replace(/-\d+$/, ''), seq: 1, capacity: 2, members: ['x']}});
    return Response.json({});
  };
  /** @type {any[]} */
  const got = [];
  const t = sseTransport({fetch: fakeFetch})({
    url: 'ws://h:1/ws', token: 'tok', rooms: [{room: 'general-1', after: '1796114764962-000001'}, {room: 'quiet-1'}],
    handlers: {open() {}, event: (e) => got.push(e), close() {}},
  });
  /** @param {() => boolean} cond */
  const until = async (cond) => {
    for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
    assert.ok(cond(), String(cond));
  };
  await until(() => stream !== undefined);
  assert.equal(lastEventID, 'general-1@1796114764962-000001,quiet-1@0-0',
    'a room the client has received nothing of resumes from its start, not as a join (the latest 50)');
  const push = (/** @type {object} */ e) => stream?.enqueue(enc.encode(`data: ${JSON.stringify(e)}\n\n`));
  push({type: 'hello', user: 'x', node: 'a', motd: ''});
  await until(() => got.length === 1);
  // ping: its pong comes once every call before it finished
  const pinged = async () => {
    const n = got.filter((e) => e.type === 'pong').length;
    assert.equal(t.send({type: 'ping'}), true);
    await until(() => got.filter((e) => e.type === 'pong').length === n + 1);
  };

  assert.equal(t.send({type: 'resume', room: 'general-1', after: '1796114764962-000001', ref: 'r1'}), true);
  assert.equal(t.send({type: 'resume', room: 'quiet-1', ref: 'r2'}), true);
  await pinged();
  assert.deepEqual(calls, [], 'the rooms of the open are the stream\'s: its position resumed them');

  assert.equal(t.send({type: 'resume', room: 'mm.quick.7-1', ref: 'e1'}), true);
  assert.equal(t.send({type: 'resume', room: 'mm.quick.7-1', ref: 'e2'}), true);
  await pinged();
  assert.deepEqual(calls, [{method: 'POST', path: '/api/v1/rooms/mm.quick.7-1/join', auth: 'Bearer tok'}], 'joined once');
  push({type: 'joined', room: {id: 'mm.quick.7-1', lobby: 'mm.quick.7', seq: 1, capacity: 2, members: ['x']}});

  // a room the stream says it entered (a join), then left
  push({type: 'joined', room: {id: 'lob-2', lobby: 'lob', seq: 2, capacity: 50, members: ['x']}});
  await until(() => got.filter((e) => e.type === 'joined').length === 2);
  t.send({type: 'resume', room: 'lob-2', ref: 'r3'});
  await pinged();
  assert.equal(calls.length, 1);
  push({type: 'left', room: 'lob-2'});
  await until(() => got.some((e) => e.type === 'left'));
  t.send({type: 'resume', room: 'lob-2', ref: 'r4'});
  t.send({type: 'leave', room: 'mm.quick.7-1', ref: 'l1'});
  t.send({type: 'resume', room: 'mm.quick.7-1', ref: 'e3'});
  await pinged();
  assert.deepEqual(calls.slice(1).map((c) => `${c.method} ${c.path}`), [
    'POST /api/v1/rooms/lob-2/join', 'POST /api/v1/rooms/mm.quick.7-1/leave', 'POST /api/v1/rooms/mm.quick.7-1/join',
  ], 'a room left is joined again');

  // a refusal is an error event with the frame's ref and room
  t.send({type: 'resume', room: 'mm.quick.8-1', ref: 'e4'});
  await pinged();
  const err = got.find((e) => e.type === 'error');
  assert.deepEqual({code: err.code, ref: err.ref, room: err.room}, {code: 'forbidden', ref: 'e4', room: 'mm.quick.8-1'});
  t.send({type: 'resume', room: 'mm.quick.8-1', ref: 'e5'});
  await pinged();
  assert.equal(calls.filter((c) => c.path === '/api/v1/rooms/mm.quick.8-1/join').length, 2, 'a refused room is not taken as followed');
  t.close();
});
