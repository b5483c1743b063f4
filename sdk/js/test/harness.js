// Real processes for the tests: chatd built from this repository, a
// private redis-server, and nodes sharing it. Nothing here fakes a
// server: every test talks to chatd over loopback.

import {spawn, execFile} from 'node:child_process';
import {mkdtemp, rm} from 'node:fs/promises';
import {existsSync} from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {promisify} from 'node:util';
import {WebSocket as WsWebSocket} from 'ws';

// Node 20 has no global WebSocket without --experimental-websocket, and the
// tests run without it: where the runtime has none, the clients the tests
// make get the `ws` package's (a dev dependency), as an application on
// Node 20 passes it (RealtimeOptions.WebSocket). Node 22+ uses its own.
if (!globalThis.WebSocket) globalThis.WebSocket = /** @type {any} */ (WsWebSocket);

const run = promisify(execFile);

/** The repository root (sdk/js/test → ../../..). */
export const repoRoot = path.resolve(import.meta.dirname, '..', '..', '..');
export const ADMIN = 'admin-token-for-the-sdk-tests';
const SECRET = 'sdk-tests-secret-0123456789abcdef';

/** @type {Set<import('node:child_process').ChildProcess>} */
const children = new Set();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/** freePort asks the kernel for a free loopback port. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const {port} = /** @type {net.AddressInfo} */ (s.address());
      s.close(() => resolve(port));
    });
  });
}

let built;
/**
 * buildChatd builds ./cmd/chatd once per test process (the Go build cache
 * makes the later ones a link), or uses CHATD_BIN.
 * @returns {Promise<string>}
 */
export function buildChatd() {
  if (process.env.CHATD_BIN) return Promise.resolve(process.env.CHATD_BIN);
  built ??= (async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'chatd-sdk-'));
    const bin = path.join(dir, 'chatd');
    const t0 = Date.now();
    await run('go', ['build', '-o', bin, './cmd/chatd'], {cwd: repoRoot, env: {...process.env, PATH: `${process.env.PATH}:/usr/local/go/bin`}});
    process.on('exit', () => {
      void rm(dir, {recursive: true, force: true});
    });
    console.error(`# built chatd in ${Date.now() - t0} ms`);
    return bin;
  })();
  return built;
}

/**
 * spawnLogged starts a process and keeps its last output for failures.
 * @param {string} cmd
 * @param {string[]} args
 */
function spawnLogged(cmd, args) {
  const proc = spawn(cmd, args, {stdio: ['ignore', 'pipe', 'pipe']});
  children.add(proc);
  let log = '';
  /** @param {Buffer} b */
  const keep = (b) => {
    log = (log + b.toString()).slice(-20000);
  };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => {
    children.delete(proc);
    resolve({code, signal});
  }));
  return {proc, exited, log: () => log};
}

/**
 * startRedis starts a private redis-server on a free port, keeping
 * nothing on disk.
 */
export async function startRedis() {
  const port = await freePort();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'chatd-sdk-redis-'));
  const p = spawnLogged('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir]);
  const deadline = Date.now() + 10000;
  for (;;) {
    if (await redisPing(port)) break;
    if (Date.now() > deadline || p.proc.exitCode !== null) throw new Error(`redis-server did not start:\n${p.log()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}/0`,
    async stop() {
      p.proc.kill('SIGKILL');
      await p.exited;
      await rm(dir, {recursive: true, force: true});
    },
  };
}

/** @param {number} port */
function redisPing(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => resolve(false));
    s.on('connect', () => s.write('PING\r\n'));
    s.on('data', (d) => {
      s.destroy();
      resolve(d.toString().startsWith('+PONG'));
    });
  });
}

/**
 * @typedef {object} Node
 * @property {string} id
 * @property {number} port
 * @property {string} url http://127.0.0.1:port
 * @property {string} ws ws://127.0.0.1:port/ws
 * @property {(signal?: NodeJS.Signals) => Promise<{code: number | null, signal: string | null}>} kill
 * @property {() => string} log
 */

/**
 * startNode starts one chatd node on redis and waits for /readyz.
 * @param {{redis: string, prefix: string, id: string, origins?: string[], port?: number, grace?: string, args?: string[]}} o
 * @returns {Promise<Node>}
 */
export async function startNode(o) {
  const bin = await buildChatd();
  const port = o.port ?? await freePort();
  const args = [
    '--addr', `127.0.0.1:${port}`, '--redis', o.redis, '--prefix', o.prefix, '--node-id', o.id,
    '--secret', SECRET, '--admin-token', ADMIN, '--log-level', 'warn', '--shutdown-grace', o.grace ?? '5s',
  ];
  if (o.origins) args.push('--allowed-origins', o.origins.join(','));
  if (o.args) args.push(...o.args);
  const p = spawnLogged(bin, args);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20000;
  for (;;) {
    try {
      const r = await fetch(`${url}/readyz`);
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline || p.proc.exitCode !== null) throw new Error(`chatd ${o.id} did not get ready:\n${p.log()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    id: o.id,
    port,
    url,
    ws: `ws://127.0.0.1:${port}/ws`,
    async kill(signal = 'SIGKILL') {
      if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill(signal);
      return /** @type {Promise<{code: number | null, signal: string | null}>} */ (p.exited);
    },
    log: p.log,
  };
}

/**
 * cluster starts a redis-server and n chatd nodes on it (ids a, b, …).
 * @param {number} n
 * @param {{origins?: string[], args?: string[]}} [o] args: more flags for every node
 */
export async function cluster(n, o = {}) {
  const redis = await startRedis();
  const prefix = `sdk${process.pid}`;
  /** @type {Node[]} */
  const nodes = [];
  for (let i = 0; i < n; i++) nodes.push(await startNode({redis: redis.url, prefix, id: String.fromCharCode(97 + i), origins: o.origins, args: o.args}));
  return {
    redis,
    prefix,
    nodes,
    /** another node on the same Redis */
    add: (/** @type {string} */ id, /** @type {number | undefined} */ port) => startNode({redis: redis.url, prefix, id, port, origins: o.origins, args: o.args}),
    async stop() {
      await Promise.all(nodes.map((x) => x.kill('SIGKILL')));
      await redis.stop();
    },
  };
}

/**
 * admin calls an admin endpoint of node with the admin token.
 * @param {Node} node
 * @param {string} method
 * @param {string} p under /api/v1
 * @param {unknown} [body]
 */
export async function admin(node, method, p, body) {
  const r = await fetch(`${node.url}/api/v1${p}`, {
    method,
    headers: {Authorization: `Bearer ${ADMIN}`, 'Content-Type': 'application/json'},
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await r.json();
  if (!r.ok) throw new Error(`admin ${method} ${p}: ${r.status} ${JSON.stringify(data)}`);
  return data;
}

/**
 * eventually polls f until it returns a truthy value or timeout ms pass.
 * @template T
 * @param {() => T | Promise<T>} f
 * @param {number} [timeout]
 * @param {string} [what]
 * @returns {Promise<T>}
 */
export async function eventually(f, timeout = 10000, what = 'condition') {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      last = await f();
      if (last) return last;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what} not met in ${timeout} ms (last: ${last instanceof Error ? last.stack : JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

let names = 0;
/** uniqueName is a fresh valid user or lobby name. */
export function uniqueName(prefix = 'u') {
  names++;
  return `${prefix}${process.pid.toString(36)}${names}`;
}

/** haveChromium says whether Debian's chromium is installed. */
export const chromiumPath = '/usr/bin/chromium';
export const haveChromium = () => existsSync(chromiumPath);
