// What the Go SDK does and the JavaScript SDK must do too, against real
// chatd nodes: resume a room from a position the application kept across
// a page reload (a new client, on another node), and fail over to the
// next base URL, REST and realtime, when a node dies.

import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import {ChatdClient, ChatdError, ErrorCodes} from '../src/index.js';
import {cluster, admin, uniqueName, eventually} from './harness.js';

/** @type {Awaited<ReturnType<typeof cluster>>} */
let c;
/** @type {import('../src/index.js').RealtimeClient[]} */
const clients = [];
before(async () => {
  c = await cluster(2);
  await admin(c.nodes[0], 'PUT', '/settings/rate.messages_per_second', {value: 1000});
});
after(async () => {
  for (const rt of clients) rt.close();
  await c?.stop();
});

test('a reload resumes each room after the kept position: what was missed, nothing twice', {timeout: 60000}, async () => {
  const lobby = uniqueName('reload');
  const sender = new ChatdClient({baseUrl: c.nodes[1].url});
  await sender.signIn(uniqueName());
  const room = await sender.join(lobby);

  // the page before the reload: it reads m1..m3 and keeps its position
  const page = new ChatdClient({baseUrl: c.nodes[0].url});
  const session = await page.signIn(uniqueName());
  const rt1 = page.realtime({backoff: {base: 200, max: 1000}});
  clients.push(rt1);
  /** @type {string[]} */
  const before = [];
  rt1.on('message', (d) => before.push(d.message.text));
  await rt1.connect();
  await rt1.enter(room.id);
  for (const t of ['m1', 'm2', 'm3']) await sender.postMessage(room.id, t);
  await eventually(() => before.includes('m3'), 15000, 'the page read m3');
  const kept = rt1.rooms().map((r) => ({room: r.room.id, after: r.lastId}));
  assert.equal(kept.length, 1);
  assert.ok(kept[0].after, 'a position to keep');
  rt1.close();

  // away: three more messages
  for (const t of ['m4', 'm5', 'm6']) await sender.postMessage(room.id, t);

  // the reloaded page: a new client with the kept token and positions, on the other node
  const reloaded = new ChatdClient({baseUrl: c.nodes[1].url, token: session.token, user: session.user});
  const rt2 = reloaded.realtime({backoff: {base: 200, max: 1000}});
  clients.push(rt2);
  /** @type {string[]} */
  const after = [];
  rt2.on('message', (d) => after.push(d.message.text));
  await rt2.connect();
  for (const k of kept) await rt2.enter(k.room, {after: k.after});
  await eventually(() => after.includes('m6'), 15000, 'the reloaded page read m6');
  await sender.postMessage(room.id, 'm7');
  await eventually(() => after.includes('m7'), 15000, 'the reloaded page read m7');
  assert.deepEqual(after, ['m4', 'm5', 'm6', 'm7'], 'what was missed, in order, once, then live');
  assert.equal(rt2.rooms()[0].lastId, (await reloaded.history(room.id, {limit: 1}))[0].id, 'the position moved on');
});

test('REST and realtime fail over to the next base URL when a node dies; sign-out works', {timeout: 90000}, async () => {
  const dying = await c.add(`f${process.pid}`);
  const alive = c.nodes[0];
  const api = new ChatdClient({baseUrls: [dying.url, alive.url], backoff: {base: 50, max: 200}});
  assert.deepEqual(api.baseUrls, [dying.url, alive.url]);
  await api.signIn(uniqueName());
  const room = await api.join(uniqueName('fo'));
  assert.equal(api.baseUrl, dying.url, 'the first URL while it answers');
  const rt = api.realtime({backoff: {base: 100, max: 500}});
  clients.push(rt);
  /** @type {string[]} */
  const nodes = [];
  rt.on('open', (h) => nodes.push(h.node));
  /** @type {string[]} */
  const got = [];
  rt.on('message', (d) => got.push(d.message.text));
  await rt.connect();
  await rt.enter(room.id);
  assert.equal(rt.hello.node, dying.id, 'realtime starts on the first URL');

  await dying.kill('SIGKILL');

  // a read: the dead node does not answer, the retry goes to the next URL
  const r = await api.room(room.id);
  assert.equal(r.id, room.id);
  assert.equal(api.baseUrl, alive.url, 'the client moved to the next URL');
  // the realtime client reconnects to the next URL and keeps the room
  await eventually(() => nodes.includes(alive.id), 30000, 'realtime reopened on the live node');
  await api.postMessage(room.id, 'after the failover');
  await eventually(() => got.includes('after the failover'), 15000, 'the message after the failover');

  // sign-out, the call that failed with ECONNREFUSED when its node died
  const other = new ChatdClient({baseUrls: [dying.url, alive.url], backoff: {base: 50, max: 200}, token: api.token, user: api.user});
  await other.signOut();
  await assert.rejects(api.room(room.id), (e) => e instanceof ChatdError && e.code === ErrorCodes.BAD_TOKEN, 'the session ended');
});
