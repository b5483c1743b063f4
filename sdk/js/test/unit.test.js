// Unit tests of the SDK's own logic, where no server can make the case
// happen on demand: the backoff's bounds, id order, header parsing, the
// close-code table, batched frame splitting, and the seam: a replay that
// overlaps what was delivered (the server never sends one, so a scripted
// transport plays it) must not reach the application twice; and when the
// realtime client gives up its main transport for the fallback.

import {test} from 'node:test';
import assert from 'node:assert/strict';
import {
  RealtimeClient, backoffDelay, compareIds, normalizeId, closeReasonOf, CloseReasons, newIdempotencyKey,
  webSocketTransport, ChatdError,
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
