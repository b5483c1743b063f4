// The REST client against a real chatd node on a private Redis.

import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import {ChatdClient, ChatdError, ErrorCodes, ClientCodes} from '../src/index.js';
import {cluster, admin, uniqueName, eventually, ADMIN} from './harness.js';

/** @type {Awaited<ReturnType<typeof cluster>>} */
let c;
before(async () => {
  c = await cluster(1);
});
after(async () => {
  await c?.stop();
});

/** a client of node 0 that records every request it makes */
function recording() {
  /** @type {{method: string, url: string, headers: Record<string, string>}[]} */
  const seen = [];
  /** @type {typeof fetch} */
  const f = async (input, init = {}) => {
    seen.push({method: init.method ?? 'GET', url: String(input), headers: {.../** @type {Record<string, string>} */ (init.headers)}});
    return fetch(input, init);
  };
  return {client: new ChatdClient({baseUrl: c.nodes[0].url, fetch: f}), seen};
}

/** @param {Promise<unknown>} p @param {string} code */
async function rejectsWith(p, code) {
  const err = await p.then(() => null, (e) => e);
  assert.ok(err instanceof ChatdError, `expected a ChatdError ${code}, got ${err}`);
  assert.equal(err.code, code, err.message);
  return err;
}

test('sessions: sign in, name taken, a second device with the token, sign out', async () => {
  const name = uniqueName('g');
  const a = new ChatdClient({baseUrl: c.nodes[0].url});
  const s = await a.signIn(name);
  assert.equal(s.user, name);
  assert.equal(a.token, s.token);
  assert.equal(a.user, name);

  const b = new ChatdClient({baseUrl: c.nodes[0].url});
  const taken = await rejectsWith(b.signIn(name), ErrorCodes.NAME_TAKEN);
  assert.equal(taken.status, 409);

  const second = await b.signIn(name, {token: s.token});
  assert.equal(second.user, name);
  assert.notEqual(second.token, s.token, 'a second session has its own token');

  const reused = new ChatdClient({baseUrl: c.nodes[0].url, token: s.token, user: name});
  assert.equal((await reused.settings()).values['room.capacity'], 50);

  await a.signOut();
  assert.equal(a.token, undefined);
  const ended = await rejectsWith(reused.wallet(), ErrorCodes.BAD_TOKEN);
  assert.equal(ended.status, 401);
  await rejectsWith(b.wallet(), ErrorCodes.BAD_TOKEN); // every token of the guest
});

test('lobbies, rooms, messages, history, unread and read marks', async () => {
  const lobby = uniqueName('lob');
  const a = new ChatdClient({baseUrl: c.nodes[0].url});
  const b = new ChatdClient({baseUrl: c.nodes[0].url});
  await a.signIn(uniqueName());
  await b.signIn(uniqueName());
  const room = await a.join(lobby);
  assert.equal(room.lobby, lobby);
  assert.equal(room.id, `${lobby}-1`);
  assert.deepEqual((await b.join(lobby)).id, room.id);
  assert.deepEqual((await a.rooms(lobby)).map((r) => r.id), [room.id]);
  assert.deepEqual([...(await a.room(room.id)).members].sort(), [a.user, b.user].sort());
  await eventually(async () => (await a.lobbies({limit: 500})).some((l) => l.lobby === lobby && l.online === 2), 5000, 'lobby listed');

  const m1 = await a.postMessage(room.id, 'one');
  const m2 = await a.postMessage(room.id, 'two');
  assert.equal(m1.from, a.user);
  assert.ok(m1.id < m2.id);
  assert.deepEqual((await b.history(room.id)).map((m) => m.text), ['one', 'two']);
  assert.deepEqual((await b.history(room.id, {after: m1.id})).map((m) => m.id), [m2.id]);
  assert.deepEqual((await b.history(room.id, {limit: 1})).map((m) => m.id), [m2.id]);

  assert.equal((await b.unread())[room.id], 2);
  await b.markRead(room.id, m1.id);
  assert.equal((await b.unread())[room.id], 1);
  await b.markRead(room.id, '0-1'); // never backwards
  assert.equal((await b.unread())[room.id], 1);

  await b.leave(room.id);
  await rejectsWith(b.postMessage(room.id, 'gone'), ErrorCodes.NOT_SEATED);
  const bad = await rejectsWith(a.join('no spaces'), ErrorCodes.BAD_NAME);
  assert.equal(bad.status, 400);
  await rejectsWith(a.room(`${lobby}-99`), ErrorCodes.UNKNOWN_ROOM);
});

test('leaderboards: every read, and a score post with an Idempotency-Key', async () => {
  const {client, seen} = recording();
  await client.signIn(uniqueName());
  const board = uniqueName('board');
  const e = await client.postScore(board, 'p1', 30);
  assert.deepEqual(e, {player: 'p1', score: 30, rank: 0});
  await client.postScore(board, 'p2', 20);
  await client.postScore(board, 'p3', 10, {mode: 'set'});
  assert.equal((await client.postScore(board, 'p3', 25, {mode: 'incr'})).score, 35);
  const posts = seen.filter((r) => r.method === 'POST' && r.url.endsWith('/scores'));
  assert.equal(posts.length, 4);
  const keys = posts.map((r) => r.headers['Idempotency-Key']);
  for (const k of keys) assert.match(k, /^k-[0-9a-f]{32}$/);
  assert.equal(new Set(keys).size, 4, 'a new key per post');
  await client.postScore(board, 'p1', 31, {idempotencyKey: 'my-key-1'});
  assert.equal(seen.at(-1)?.headers['Idempotency-Key'], 'my-key-1');

  assert.deepEqual((await client.leaderboardTop(board)).map((x) => x.player), ['p3', 'p1', 'p2']);
  assert.deepEqual((await client.leaderboardTop(board, {limit: 1})).map((x) => x.player), ['p3']);
  assert.deepEqual(await client.leaderboardPlayer(board, 'p2'), {player: 'p2', score: 20, rank: 2});
  assert.deepEqual((await client.leaderboardAround(board, 'p1', {radius: 1})).map((x) => x.player), ['p3', 'p1', 'p2']);
  assert.deepEqual((await client.leaderboardRange(board, {min: 20, max: 31})).map((x) => x.score), [31, 20]);
  assert.deepEqual((await client.leaderboardRanks(board, ['p2', 'nobody'])).map((x) => x.rank), [2, -1]);
  await rejectsWith(client.leaderboardPlayer(board, 'nobody'), ErrorCodes.UNKNOWN_PLAYER);
});

test('shop: a buy whose answer is lost is retried with the same key and buys once', async () => {
  const item = uniqueName('item');
  await admin(c.nodes[0], 'POST', '/shop/items', {item, stock: 5, price: 10});
  /** @type {(string | undefined)[]} */
  const keys = [];
  let lose = 1;
  /** @type {typeof fetch} */
  const lossy = async (input, init = {}) => {
    const res = await fetch(input, init);
    if (String(input).endsWith('/shop/buy')) {
      keys.push(/** @type {Record<string, string>} */ (init.headers)['Idempotency-Key']);
      if (lose-- > 0) {
        await res.text();
        throw new TypeError('fetch failed: the answer was lost on the way back');
      }
    }
    return res;
  };
  /** @type {import('../src/index.js').RetryInfo[]} */
  const retries = [];
  const client = new ChatdClient({baseUrl: c.nodes[0].url, fetch: lossy, onRetry: (r) => retries.push(r)});
  await client.signIn(uniqueName());
  await admin(c.nodes[0], 'POST', '/wallet/grant', {user: client.user, amount: 100});

  assert.deepEqual(await client.shopItems().then((xs) => xs.find((x) => x.item === item)), {item, stock: 5, price: 10});
  const w = await client.buy(item);
  assert.equal(keys.length, 2, 'the first answer was lost and the buy retried');
  assert.equal(keys[0], keys[1], 'the retry carries the same Idempotency-Key');
  assert.equal(retries.length, 1);
  assert.equal(retries[0].error.code, ClientCodes.NETWORK);
  assert.deepEqual(w, {balance: 90, items: {[item]: 1}});
  assert.deepEqual(await client.wallet(), {balance: 90, items: {[item]: 1}}, 'bought once');

  const w2 = await client.buy(item, {qty: 2, idempotencyKey: 'buy-two'});
  assert.equal(w2.balance, 70);
  assert.deepEqual(await client.buy(item, {qty: 2, idempotencyKey: 'buy-two'}), w2, 'the same key answers the first answer');
  await rejectsWith(client.buy(item, {qty: 3, idempotencyKey: 'buy-two'}), ErrorCodes.BAD_REQUEST);
  const sold = await rejectsWith(client.buy(item, {qty: 3}), ErrorCodes.SOLD_OUT);
  assert.equal(sold.status, 409);
  assert.equal((await client.wallet()).balance, 70);
});

test('a message post retried after a lost answer reuses its Idempotency-Key', async () => {
  /** @type {string[]} */
  const keys = [];
  let lose = 1;
  /** @type {typeof fetch} */
  const lossy = async (input, init = {}) => {
    const res = await fetch(input, init);
    if (init.method === 'POST' && String(input).endsWith('/messages')) {
      keys.push(/** @type {Record<string, string>} */ (init.headers)['Idempotency-Key']);
      if (lose-- > 0) throw new TypeError('fetch failed');
    }
    return res;
  };
  const client = new ChatdClient({baseUrl: c.nodes[0].url, fetch: lossy, backoff: {base: 10, max: 20}});
  await client.signIn(uniqueName());
  const room = await client.join(uniqueName('lob'));
  const m = await client.postMessage(room.id, 'hello');
  assert.equal(m.text, 'hello');
  assert.equal(keys.length, 2);
  assert.equal(keys[0], keys[1]);
  await client.postMessage(room.id, 'again');
  assert.notEqual(keys[2], keys[0], 'each post has its own key');
});

test('seen filter and settings', async () => {
  const client = new ChatdClient({baseUrl: c.nodes[0].url});
  await client.signIn(uniqueName());
  await client.markSeen(['a', 'b']);
  assert.deepEqual(await client.filterSeen(['a', 'x', 'b', 'y']), ['x', 'y']);
  const s = await client.settings();
  assert.equal(typeof s.version, 'number');
  assert.equal(s.values['message.max_length'], 2000);
  const defs = await client.settingDefs();
  assert.ok(defs.some((d) => d.key === 'room.capacity' && d.type === 'int' && d.default === 50));
  const p = await client.presence(/** @type {string} */ (client.user));
  assert.equal(p.user, client.user);
});

test('abort: a parked long poll ends at once with code aborted', async () => {
  const client = new ChatdClient({baseUrl: c.nodes[0].url});
  await client.signIn(uniqueName());
  await client.poll(); // the first poll returns the full state
  const ctl = new AbortController();
  const t0 = Date.now();
  setTimeout(() => ctl.abort(), 200);
  const err = await rejectsWith(client.poll({wait: 20, signal: ctl.signal}), ClientCodes.ABORTED);
  assert.ok(Date.now() - t0 < 5000, `aborted after ${Date.now() - t0} ms`);
  assert.equal(err.status, 0);
  await rejectsWith(client.wallet({signal: AbortSignal.abort()}), ClientCodes.ABORTED);
});

test('poll loop: dirty sections as they happen, and it ends on abort', async () => {
  const poller = new ChatdClient({baseUrl: c.nodes[0].url});
  const sender = new ChatdClient({baseUrl: c.nodes[0].url});
  await poller.signIn(uniqueName());
  await sender.signIn(uniqueName());
  const lobby = uniqueName('lob');
  const room = await poller.join(lobby);
  await sender.join(lobby);
  const ctl = new AbortController();
  /** @type {import('../src/index.js').PollAnswer[]} */
  const answers = [];
  const loop = (async () => {
    for await (const a of poller.pollLoop({wait: 5, signal: ctl.signal})) {
      answers.push(a);
      if (a.data.messages?.[room.id]?.some((m) => m.text === 'over REST')) ctl.abort();
    }
  })();
  await eventually(() => answers.length > 0, 5000, 'the first poll');
  assert.ok(answers[0].dirty.includes('rooms'), 'a new session starts all dirty');
  assert.deepEqual(answers[0].data.rooms?.map((r) => r.id), [room.id]);
  const sent = await sender.postMessage(room.id, 'over REST');
  await loop; // ends by itself once the message came, by the abort
  const got = answers.flatMap((a) => a.data.messages?.[room.id] ?? []);
  assert.ok(got.some((m) => m.id === sent.id));
});

test('poll loop: backs off through a node restart and goes on', async () => {
  const node = await c.add('poll-node');
  const poller = new ChatdClient({baseUrl: node.url, timeout: 3000});
  const sender = new ChatdClient({baseUrl: c.nodes[0].url});
  await poller.signIn(uniqueName());
  await sender.signIn(uniqueName());
  const lobby = uniqueName('lob');
  const room = await poller.join(lobby);
  await sender.join(lobby);
  await poller.poll();
  const ctl = new AbortController();
  /** @type {import('../src/index.js').PollLoopError[]} */
  const errors = [];
  /** @type {string[]} */
  const texts = [];
  const loop = (async () => {
    for await (const a of poller.pollLoop({wait: 2, signal: ctl.signal, backoff: {base: 100, max: 400}, onError: (e) => errors.push(e)})) {
      for (const m of a.data.messages?.[room.id] ?? []) texts.push(m.text);
      if (texts.includes('after the restart')) ctl.abort();
    }
  })();
  await sender.postMessage(room.id, 'before');
  await eventually(() => texts.includes('before'), 5000, 'message before the restart');
  await node.kill('SIGKILL');
  await eventually(() => errors.length >= 2, 10000, 'failed polls while the node is down');
  const again = await c.add('poll-node2', node.port);
  try {
    await sender.postMessage(room.id, 'after the restart');
    await loop;
  } finally {
    await again.kill();
  }
  assert.ok(errors.every((e) => e.error.code === ClientCodes.NETWORK), JSON.stringify(errors.map((e) => e.error.code)));
  assert.deepEqual(errors.map((e) => e.attempt).slice(0, 2), [1, 2]);
  assert.ok(errors.every((e) => e.delay >= 0 && e.delay < 400));
  assert.ok(texts.includes('after the restart'));
});

test('429 carries retryAfter (from Retry-After) and counts as retryable', async () => {
  await admin(c.nodes[0], 'PUT', '/settings/limit.sessions_per_ip_per_minute', {value: 1});
  try {
    const client = new ChatdClient({baseUrl: c.nodes[0].url});
    const err = await eventually(async () => {
      try {
        await client.signIn(uniqueName());
        return null;
      } catch (e) {
        return e;
      }
    }, 10000, 'a 429');
    assert.ok(err instanceof ChatdError);
    assert.equal(err.code, ErrorCodes.RATE_LIMITED);
    assert.equal(err.status, 429);
    assert.ok(typeof err.retryAfter === 'number' && err.retryAfter > 0, `retryAfter ${err.retryAfter}`);
    assert.ok(err.retryable);
  } finally {
    await admin(c.nodes[0], 'DELETE', '/settings/limit.sessions_per_ip_per_minute');
  }
});

test('request: any operation by method and path, with the client\'s token; refusals as ChatdError', async () => {
  const adm = new ChatdClient({baseUrl: c.nodes[0].url, token: ADMIN});
  const mod = await adm.request('GET', '/moderation');
  assert.ok(Array.isArray(mod.mutes) && Array.isArray(mod.bans), JSON.stringify(mod));
  // the tests before signed in many guests from this address: one more may not fit in the minute
  await adm.request('PUT', '/settings/limit.sessions_per_ip_per_minute', {body: {value: 100000}});
  try {
    const lob = uniqueName('lob');
    const user = new ChatdClient({baseUrl: c.nodes[0].url});
    const name = uniqueName();
    await eventually(() => user.signIn(name).then(() => true, (e) => {
      if (e.code !== ErrorCodes.RATE_LIMITED) throw e;
      return false; // until the new limit reaches the node
    }), 10000, 'a session');
    const joined = await user.request('POST', `/lobbies/${lob}/join`);
    assert.equal(joined.room.lobby, lob);
    const page = await user.request('GET', '/lobbies', {query: {limit: 1}});
    assert.equal(page.lobbies.length, 1);
    await rejectsWith(user.request('GET', '/moderation'), ErrorCodes.FORBIDDEN);
    await rejectsWith(new ChatdClient({baseUrl: c.nodes[0].url}).request('GET', '/wallet'), ErrorCodes.BAD_TOKEN);
  } finally {
    await adm.request('DELETE', '/settings/limit.sessions_per_ip_per_minute');
  }
});
