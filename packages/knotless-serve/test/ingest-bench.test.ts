// The ingest bench at a small rate, as a test that it works: the real appview (the bundle) follows a
// synthetic relay stream of signed frames from 1,000 accounts with real knotless records among them,
// indexes every event, shows every knotless record on its page, and resolves no DID but the knotless
// account's. Speed is the bench's to report (performance.md), never asserted here.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import type { IdResolver } from '@atproto/identity';
import { Firehose, FirehoseSubscriptionError, type Event } from '@atproto/sync';
import { networkFrames, setSeq } from '../../../bench/ingest/frames.ts';
import { startBenchRelay } from '../../../bench/ingest/stream-server.ts';

const root = path.resolve(import.meta.dirname, '../../..');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-ingest-bench-test-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

interface Report {
  events_per_second: number;
  cpu_ms_per_1000_events: number;
  rss_mib: number;
  knotless_visible_p95_ms: number;
  did_resolutions: number;
  did_resolutions_of_other_accounts: number;
  accounts: number;
  steps: { rate: number; events: number; knotless: number }[];
}

describe('npm run bench:ingest', () => {
  it('runs at a small rate and reports every figure', async () => {
    const file = path.join(dir, 'out.json');
    await promisify(execFile)(
      process.execPath,
      [
        '--conditions=development',
        path.join(root, 'bench/ingest.ts'),
        '--rates',
        '200',
        '--seconds',
        '3',
        '--accounts',
        '1000',
        '--json',
        file,
      ],
      { cwd: root, maxBuffer: 64 * 1024 * 1024 },
    );
    const r = JSON.parse(fs.readFileSync(file, 'utf8')) as Report;
    assert.equal(r.accounts, 1000);
    assert.equal(r.steps.length, 1);
    assert.ok(r.steps[0]!.events >= 600, JSON.stringify(r));
    // The repository, and one record for the 0.1 % of 600 events (at least one).
    assert.ok(r.steps[0]!.knotless >= 2, JSON.stringify(r));
    for (const k of [
      'events_per_second',
      'cpu_ms_per_1000_events',
      'rss_mib',
      'knotless_visible_p95_ms',
    ] as const)
      assert.ok(Number.isFinite(r[k]) && r[k] >= 0, `${k}: ${r[k]}`);
    // The knotless account is resolved (its commits are verified with its key); no other is.
    assert.ok(r.did_resolutions >= 1, JSON.stringify(r));
    assert.equal(r.did_resolutions_of_other_accounts, 0);
  });
});

describe("the bench's frames", () => {
  it('are what a relay sends: @atproto/sync validates every one and verifies each commit with its key', async () => {
    const keys = new Map<string, string>();
    const frames = await networkFrames(200, 200, () => {}, keys);
    // One account's commits checked against another's key: that commit, and only it, must fail.
    const dids = [...keys.keys()];
    const wrong = dids[0]!;
    const resolve = new Map(keys).set(wrong, keys.get(dids[1]!)!);
    // Only the key lookup is stood in for (the accounts are synthetic, with no DID documents); the
    // rest is the ecosystem's own firehose client.
    const idResolver = {
      did: {
        resolveAtprotoKey: (did: string) => Promise.resolve(resolve.get(did)!),
        resolve: () => Promise.resolve(null),
      },
    } as unknown as IdResolver;
    const relay = await startBenchRelay();
    const events: Event[] = [];
    const errors: { did: string; message: string }[] = [];
    let seen = 0;
    let done: () => void = () => {};
    let broken: (err: Error) => void = () => {};
    const all = new Promise<void>((resolve, reject) => ((done = resolve), (broken = reject)));
    const count = (): void => void (++seen === frames.length && done());
    const firehose = new Firehose({
      service: relay.url,
      idResolver,
      unauthenticatedHandles: true,
      handleEvent: (evt) => {
        events.push(evt);
        count();
      },
      onError: (err) => {
        // The stream itself refused (a frame it cannot decode): the client would reconnect forever.
        if (err instanceof FirehoseSubscriptionError) return broken(err);
        const evt = (err as { event?: { repo?: string; did?: string } }).event;
        errors.push({ did: evt?.repo ?? evt?.did ?? '', message: err.message });
        count();
      },
    });
    const running = firehose.start();
    try {
      await relay.run({ frames: frames.map((f, i) => Buffer.from(setSeq(f, 100_000 + i))), rate: 2000 });
      await all;
    } finally {
      await firehose.destroy();
      await running;
      await relay.close();
    }
    const wrongOnes = frames.length - events.length;
    assert.ok(wrongOnes >= 1, 'the commit checked against another key was refused');
    assert.deepEqual(new Set(errors.map((e) => e.did)), new Set([wrong]), JSON.stringify(errors.slice(0, 3)));
    const kinds = new Map<string, number>();
    for (const e of events) kinds.set(e.event, (kinds.get(e.event) ?? 0) + 1);
    assert.ok((kinds.get('create') ?? 0) > 150, JSON.stringify([...kinds]));
    assert.ok(
      (kinds.get('identity') ?? 0) >= 1 && (kinds.get('account') ?? 0) >= 1,
      JSON.stringify([...kinds]),
    );
    for (const e of events) if (e.event === 'create') assert.match(e.collection, /^app\.bsky\./);
  });
});
