// The rpc hook through the SDK, against real chatd nodes and a small
// backend here that checks chatd's signature: rpc over the WebSocket,
// over the SSE fallback's REST call and over REST answers the backend's
// data; the backend's refusal is a ChatdError hook_denied with its reason;
// hello carries the connect hook's data.

import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import {createHmac, timingSafeEqual} from 'node:crypto';
import {ChatdClient, ChatdError, sseTransport} from '../src/index.js';
import {cluster, uniqueName} from './harness.js';

const SECRET = 'sdk-hook-secret-0123456789';

/** @type {Awaited<ReturnType<typeof cluster>>} */
let c;
/** @type {http.Server} */
let backend;
let verified = 0;

/**
 * verify checks X-Chatd-Signature over "timestamp.body" and the replay window.
 * @param {http.IncomingMessage} req
 * @param {Buffer} body
 */
function verify(req, body) {
  const ts = String(req.headers['x-chatd-timestamp'] ?? '');
  if (Math.abs(Date.now() / 1000 - Number(ts)) > 300) return false;
  const want = createHmac('sha256', SECRET).update(`${ts}.`).update(body).digest();
  return String(req.headers['x-chatd-signature'] ?? '').split(',').some((s) => {
    const got = Buffer.from(s.trim().replace(/^v1=/, ''), 'hex');
    return got.length === want.length && timingSafeEqual(got, want);
  });
}

before(async () => {
  backend = http.createServer((req, res) => {
    /** @type {Buffer[]} */
    const parts = [];
    req.on('data', (d) => parts.push(d));
    req.on('end', () => {
      const body = Buffer.concat(parts);
      if (!verify(req, body)) {
        res.writeHead(401).end();
        return;
      }
      verified++;
      const r = JSON.parse(body.toString());
      /** @type {Record<string, unknown>} */
      let out = {};
      if (req.url === '/connect') out = {data: {tier: 'gold'}};
      if (req.url === '/rpc') out = r.method === 'echo' ? {data: {echo: r.data ?? null, user: r.user}} : {deny: {reason: 'no such method'}};
      res.writeHead(200, {'Content-Type': 'application/json'}).end(JSON.stringify(out));
    });
  });
  await new Promise((resolve) => backend.listen(0, '127.0.0.1', () => resolve(undefined)));
  const addr = /** @type {import('node:net').AddressInfo} */ (backend.address());
  c = await cluster(1, {args: ['--hook-url', `http://127.0.0.1:${addr.port}`, '--hooks', 'connect,rpc', '--hook-secret', SECRET]});
});
after(async () => {
  await c?.stop();
  backend?.close();
});

test('Hook: rpc round trip over the WebSocket, the SSE fallback and REST; a denial is hook_denied', {timeout: 60000}, async () => {
  const cl = new ChatdClient({baseUrl: c.nodes[0].url});
  const user = uniqueName();
  await cl.signIn(user);
  for (const transport of ['websocket', 'sse']) {
    const rt = cl.realtime(transport === 'sse' ? {transport: sseTransport()} : {});
    const open = await rt.connect();
    if (transport === 'websocket') assert.deepEqual(rt.hello.data, {tier: 'gold'}, 'hello carries the connect hook data');
    assert.ok(open);
    assert.deepEqual(await rt.rpc('echo', {n: 1}), {echo: {n: 1}, user});
    await assert.rejects(rt.rpc('launch'), (/** @type {ChatdError} */ e) => {
      assert.equal(e.code, 'hook_denied');
      assert.match(e.message, /no such method/i);
      return true;
    });
    rt.close();
  }
  assert.deepEqual(await cl.rpc('echo', [1, 2]), {echo: [1, 2], user});
  await assert.rejects(cl.rpc('launch'), (/** @type {ChatdError} */ e) => e.code === 'hook_denied');
  assert.ok(verified >= 6, `the backend verified ${verified} signed calls`);
});
