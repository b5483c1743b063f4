// The SDK in headless Chromium: a page served by a small HTTP server of
// this test (the SDK's source as it ships, and /api proxied to a chatd
// node, so that REST is same-origin: chatd sends no CORS headers) opens
// WebSockets straight to two chatd nodes that allow the page's Origin
// (--allowed-origins). The page signs in, joins, says and gets its ack;
// the node it is on is killed and it carries on through the other one,
// with no gap and no duplicate.

import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import {readFile} from 'node:fs/promises';
import path from 'node:path';
import {ChatdClient} from '../src/index.js';
import {cluster, uniqueName, eventually, haveChromium, chromiumPath} from './harness.js';

const src = path.resolve(import.meta.dirname, '..', 'src');
const PAGE = `<!doctype html><meta charset="utf-8"><title>chatd SDK test</title>
<script type="module">
  import * as sdk from '/sdk/index.js';
  window.sdk = sdk;
  window.sdkLoaded = true;
</script>`;

/** @type {Awaited<ReturnType<typeof cluster>>} */
let c;
/** @type {http.Server} */
let server;
let origin = '';
/** @type {string} */
let upstream = '';

before(async () => {
  server = http.createServer(async (req, res) => {
    const url = req.url ?? '/';
    if (url === '/' || url === '/test.html') {
      res.writeHead(200, {'Content-Type': 'text/html; charset=utf-8'}).end(PAGE);
      return;
    }
    const m = /^\/sdk\/([a-z]+\.js)$/.exec(url);
    if (m) {
      try {
        const body = await readFile(path.join(src, m[1]));
        res.writeHead(200, {'Content-Type': 'text/javascript; charset=utf-8'}).end(body);
      } catch {
        res.writeHead(404).end();
      }
      return;
    }
    if (url.startsWith('/api/')) {
      const up = new URL(url, upstream);
      const p = http.request(up, {method: req.method, headers: {...req.headers, host: up.host}}, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      p.on('error', () => res.writeHead(502, {'Content-Type': 'application/json'}).end('{"error":{"code":"internal","message":"no node answers"}}'));
      req.pipe(p);
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', () => r(undefined)));
  const {port} = /** @type {import('node:net').AddressInfo} */ (server.address());
  origin = `http://127.0.0.1:${port}`;
  c = await cluster(2, {origins: [origin]});
  upstream = c.nodes[1].url; // REST through the node that stays up
});

after(async () => {
  server?.close();
  await c?.stop();
});

test('in Chromium: sign in, connect, join, say/ack, and a reconnect to the other node with no gap and no duplicate', {timeout: 120000}, async (t) => {
  if (!haveChromium()) {
    if (process.env.CHATD_TEST_STRICT === '1') assert.fail(`${chromiumPath} is missing (apt-get install chromium)`);
    t.skip(`${chromiumPath} is missing`);
    return;
  }
  const {chromium} = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  try {
    const page = await browser.newPage();
    /** @type {string[]} */
    const console_ = [];
    page.on('console', (m) => console_.push(m.text()));
    page.on('pageerror', (e) => console_.push(String(e)));
    await page.goto(`${origin}/test.html`);
    await page.waitForFunction(() => /** @type {any} */ (window).sdkLoaded === true, null, {timeout: 10000});

    const [a, b] = c.nodes;
    const lobby = uniqueName('lob');
    const name = uniqueName('web');
    const first = await page.evaluate(async ({urls, lobby, name}) => {
      const w = /** @type {any} */ (window);
      const {ChatdClient} = w.sdk;
      const api = new ChatdClient({baseUrl: location.origin});
      await api.signIn(name);
      const settings = await api.settings();
      const rt = api.realtime({url: urls, backoff: {base: 200, max: 1000}});
      w.rt = rt;
      w.ids = [];
      w.reconnects = 0;
      rt.on('message', (/** @type {any} */ d) => w.ids.push(d.message.id));
      rt.on('open', (/** @type {any} */ h) => { if (h.reconnected) { w.reconnects++; w.node = h.node; } });
      const hello = await rt.connect();
      const room = await rt.join(lobby);
      const ack = await rt.say(room.id, 'from the browser');
      return {node: hello.node, room: room.id, ack: ack.id, maxLength: settings.values['message.max_length']};
    }, {urls: [a.ws, b.ws], lobby, name});
    assert.equal(first.node, 'a');
    assert.equal(first.maxLength, 2000);
    assert.match(first.ack, /^\d{13}-\d{6}$/);

    const other = new ChatdClient({baseUrl: b.url});
    await other.signIn(uniqueName());
    await other.join(lobby);
    await other.postMessage(first.room, 'before the kill');
    await a.kill('SIGKILL');
    for (let i = 0; i < 20; i++) await other.postMessage(first.room, `during ${i}`);
    await eventually(() => page.evaluate(() => /** @type {any} */ (window).reconnects === 1), 15000, 'the page reconnected');
    const second = await page.evaluate(async (room) => {
      const w = /** @type {any} */ (window);
      const ack = await w.rt.say(room, 'after the kill');
      return {ack: ack.id, node: w.node};
    }, first.room);
    assert.equal(second.node, 'b');
    const history = (await other.history(first.room, {limit: 1000})).map((m) => m.id);
    assert.equal(history.at(-1), second.ack);
    const ids = await eventually(async () => {
      const got = /** @type {string[]} */ (await page.evaluate(() => /** @type {any} */ (window).ids));
      return got.at(-1) === second.ack ? got : null;
    }, 10000, 'the page saw its own message');
    assert.deepEqual(ids, history, 'no gap, no duplicate');
    assert.deepEqual(console_.filter((l) => /Error/.test(l) && !/WebSocket/.test(l)), []);
  } finally {
    await browser.close();
  }
});
