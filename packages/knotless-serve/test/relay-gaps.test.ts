// A hostile relay that keeps saying it lost the appview's position (`OutdatedCursor`): each message
// could make the appview read every account it knows again. It gets one such pass in the appview's
// interval, the messages meanwhile merged into one pass that waits for its time. The relay is the
// dev network's stand-in over the real reference PDS; the re-reads are the appview's own count.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startRelay, type Relay } from 'knotless-devnet';
import { useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import { startAppview } from '../src/appview.ts';
import { defaultConfig } from '../src/config.ts';
import { waitFor } from './helpers.ts';

const t = useNetwork(['alice.test']);
const alice = useGitUser(t, 'alice.test');

describe('a relay repeating OutdatedCursor', () => {
  let relay: Relay;
  before(async () => {
    await t.ready;
    relay = await startRelay({ pdses: t.net.pdses.map((p) => p.url) });
    assert.equal((await alice.knotless('repo', 'create', 'flooded')).code, 0);
  });
  after(async () => {
    await relay?.close();
  });

  /** An appview following only the relay, once it has read alice's account and follows the stream. */
  async function following(gapResyncMs: number) {
    const lines: string[] = [];
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-serve-'));
    const app = await startAppview(
      {
        ...defaultConfig(dataDir),
        database: ':memory:',
        port: 0,
        plcUrl: t.net.plcUrl,
        relays: [relay.url],
        dev: true,
        gapResyncMs,
      },
      (line) => lines.push(line),
    );
    await waitFor('the appview to find the repository through the relay', async () =>
      (await app.index.repos({ did: t.dids['alice.test']!, limit: 10 })).length > 0 ? true : undefined,
    );
    await waitFor('the appview to follow the relay', () =>
      Promise.resolve(relay.consumers > 0 ? true : undefined),
    );
    await app.idle();
    const gaps = (): number => lines.filter((l) => l.includes('lost events (OutdatedCursor)')).length;
    return { app, gaps };
  }

  it('makes one pass of re-reads in the interval, however often it says so', async () => {
    // Longer than the test: every message after the first falls in the interval.
    const { app, gaps } = await following(60 * 60 * 1000);
    try {
      const start = app.resync.accountsRead;
      const reads: number[] = [];
      for (let i = 1; i <= 5; i++) {
        relay.info('OutdatedCursor', 'Requested cursor exceeded limit. Possibly missing events');
        await waitFor(`the appview to hear message ${i}`, () =>
          Promise.resolve(gaps() >= i ? true : undefined),
        );
        await app.idle();
        reads.push(app.resync.accountsRead - start);
      }
      // The first message reads every account (alice's) again; the next four read none.
      assert.ok(reads[0]! >= 1, `the first message read no account: ${reads.join(', ')}`);
      assert.deepEqual(
        reads,
        Array(5).fill(reads[0]),
        `accounts read after each message: ${reads.join(', ')}`,
      );
      assert.equal(app.resync.gapWaiting, true, 'the later messages wait, merged into one pass');
    } finally {
      await app.close();
    }
  });

  it('still reads again once the interval is up, for the messages it held back', async () => {
    const { app, gaps } = await following(1000);
    try {
      const start = app.resync.accountsRead;
      for (let i = 1; i <= 3; i++) relay.info('OutdatedCursor', 'Possibly missing events');
      await waitFor('the appview to hear the messages', () =>
        Promise.resolve(gaps() >= 3 ? true : undefined),
      );
      // Alice's account read twice: by the first message's pass, then by the one held back.
      await waitFor('the pass held back to run', () =>
        Promise.resolve(!app.resync.gapWaiting && app.resync.accountsRead - start >= 2 ? true : undefined),
      );
    } finally {
      await app.close();
    }
  });
});
