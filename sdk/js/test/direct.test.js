// Direct messages and blocks through the SDK against real chatd nodes.

import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import {ChatdClient, ChatdError, ErrorCodes} from '../src/index.js';
import {cluster, uniqueName, eventually} from './harness.js';

/** @type {Awaited<ReturnType<typeof cluster>>} */
let c;
before(async () => {
  c = await cluster(2);
});
after(async () => {
  await c?.stop();
});

test('Direct: a message sent over REST on one node reaches the other user realtime on another; a block refuses it', {timeout: 60000}, async () => {
  const aliceName = uniqueName('a');
  const bobName = uniqueName('b');
  const alice = new ChatdClient({baseUrl: c.nodes[0].url});
  await alice.signIn(aliceName);
  const bob = new ChatdClient({baseUrl: c.nodes[1].url});
  await bob.signIn(bobName);
  const rt = bob.realtime({});
  /** @type {string[]} */
  const got = [];
  rt.on('dm', (m) => got.push(m.text));
  await rt.connect();
  try {
    const m = await alice.sendDirect(bobName.toUpperCase(), 'psst');
    assert.match(m.conversation, /^dm-[0-9a-f]{32}$/);
    await eventually(() => got.length === 1, 10000, 'the dm event');
    assert.deepEqual(got, ['psst']);
    const list = await bob.conversations();
    assert.equal(list.length, 1);
    assert.equal(list[0].unread, 1);
    const page = await bob.directHistory(m.conversation);
    assert.equal(page.messages[0].text, 'psst');
    assert.equal(await bob.markDirectRead(aliceName, m.id), 0);

    await bob.block(aliceName);
    assert.deepEqual(await bob.blocks(), [aliceName.toLowerCase()]);
    const err = await alice.sendDirect(bobName, 'hello?').then(() => null, (e) => e);
    assert.ok(err instanceof ChatdError);
    assert.equal(err.code, ErrorCodes.BLOCKED);
    await bob.unblock(aliceName);
    await alice.sendDirect(bobName, 'back');
    await eventually(() => got.length === 2, 10000, 'the dm after unblock');
  } finally {
    rt.close();
  }
});
