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
