// The package as npm packs it: the files it ships, its version against
// the API version the server documents, and its types as a TypeScript
// program sees them.

import {test} from 'node:test';
import assert from 'node:assert/strict';
import {execFile} from 'node:child_process';
import {readFile, readdir} from 'node:fs/promises';
import path from 'node:path';
import {promisify} from 'node:util';
import {repoRoot} from './harness.js';

const run = promisify(execFile);
const dir = path.resolve(import.meta.dirname, '..');

test('npm pack ships the source, the types and the README, nothing else', {timeout: 120000}, async () => {
  const {stdout} = await run('npm', ['pack', '--dry-run', '--json', '--offline'], {cwd: dir});
  const [pack] = JSON.parse(stdout);
  const files = pack.files.map((/** @type {{path: string}} */ f) => f.path).sort();
  const src = (await readdir(path.join(dir, 'src'))).filter((f) => f.endsWith('.js'));
  for (const f of src) {
    assert.ok(files.includes(`src/${f}`), `src/${f} is packed`);
    assert.ok(files.includes(`types/${f.replace(/\.js$/, '.d.ts')}`), `types for ${f} are packed`);
  }
  assert.ok(files.includes('README.md'));
  assert.ok(files.includes('package.json'));
  assert.deepEqual(files.filter((f) => !/^(src\/|types\/|README\.md$|package\.json$|LICENSE$)/.test(f)), [], 'nothing else');
  assert.equal(pack.name, '@chatd/client');
});

test('the major version is the API version of openapi.json', async () => {
  const pkg = JSON.parse(await readFile(path.join(dir, 'package.json'), 'utf8'));
  const api = JSON.parse(await readFile(path.join(repoRoot, 'docs', 'openapi.json'), 'utf8'));
  assert.equal(pkg.version.split('.')[0], api.info.version);
  assert.equal(pkg.chatd.api, api.info.version);
  assert.deepEqual(pkg.dependencies ?? {}, {}, 'no runtime dependencies');
});

test('the published types serve a TypeScript program', {timeout: 120000}, async () => {
  await run('npx', ['--offline', 'tsc', '-p', 'tsconfig.types.json'], {cwd: dir});
  await run('npx', ['--offline', 'tsc', '-p', 'test/consumer/tsconfig.json'], {cwd: dir}).catch((e) => {
    assert.fail(`tsc on the consumer failed:\n${e.stdout}${e.stderr}`);
  });
});

test('every error code of the contract has a constant', async () => {
  const {ErrorCodes} = await import('../src/index.js');
  const api = JSON.parse(await readFile(path.join(repoRoot, 'docs', 'openapi.json'), 'utf8'));
  const codes = new Set(Object.values(ErrorCodes));
  for (const c of api.components.schemas.ErrorCode.enum) assert.ok(codes.has(c), `ErrorCodes has ${c}`);
});

test('every close code of the contract has a reason', async () => {
  const {closeReasonOf, CloseReasons} = await import('../src/index.js');
  const ws = JSON.parse(await readFile(path.join(repoRoot, 'docs', 'ws-frames.schema.json'), 'utf8'));
  for (const code of ws.$defs.CloseCode.enum) assert.notEqual(closeReasonOf(code).reason, CloseReasons.UNKNOWN, String(code));
});
