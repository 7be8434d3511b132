// scripts/test.ts, the command behind `npm test`: a cancelled test fails the run like a failed one,
// and the last line says how many of each.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function npmTest(fixture: string): { code: number | null; last: string; out: string } {
  // Without NODE_TEST_CONTEXT, which the outer runner sets for its own children: with it, the inner
  // runner would report to the outer one instead of printing.
  const env = { ...process.env };
  delete env['NODE_TEST_CONTEXT'];
  const r = spawnSync(process.execPath, ['scripts/test.ts', `scripts/test/fixtures/${fixture}.ts`], {
    cwd: root,
    env,
    encoding: 'utf8',
  });
  const out = r.stdout + r.stderr;
  return { code: r.status, last: out.trim().split('\n').at(-1) ?? '', out };
}

it('fails the run when a test is cancelled, though the runner counts no failure', () => {
  const r = npmTest('cancelled');
  assert.match(r.out, /ℹ fail 0/);
  assert.match(r.out, /ℹ cancelled 1/);
  assert.equal(r.code, 1, r.out);
  assert.equal(r.last, '✖ 1 of 2 tests failed: 0 failed, 1 cancelled');
});

it('fails the run when a test fails', () => {
  const r = npmTest('failing');
  assert.equal(r.code, 1, r.out);
  assert.equal(r.last, '✖ 1 of 2 tests failed: 1 failed, 0 cancelled');
});

it('passes when every test passes', () => {
  const r = npmTest('passing');
  assert.equal(r.code, 0, r.out);
  assert.equal(r.last, '✔ 2 of 2 tests passed');
});
