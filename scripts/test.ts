// `npm test`: Node's test runner over every package's tests, and a verdict that counts a cancelled
// test (a hook that failed, a file that timed out or crashed) as a failure. The spec reporter's own
// summary lists `fail 0` beside `cancelled 5`, and a reader takes that for a pass.
// Arguments replace the default file pattern: `npm test -- packages/knotless/test/errors.test.ts`.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface Counts {
  tests: number;
  passed: number;
  failed: number;
  cancelled: number;
  skipped: number;
  todo: number;
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const reporter = path.join(root, 'scripts', 'test', 'summary-reporter.ts');
const countsFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-test-')), 'counts.json');
const files =
  process.argv.length > 2
    ? process.argv.slice(2)
    : ['packages/*/test/**/*.test.ts', 'scripts/test/*.test.ts'];

const child = spawn(
  process.execPath,
  [
    // The workspace's packages import knotless-core's TypeScript sources, not its build (see its
    // package.json's exports), so that a test runs the code as it is now.
    '--conditions=development',
    '--test',
    // A guard against a hang, not a speed claim: Node applies it to each test file's whole run as well
    // as to each test, and on a loaded 2-core machine the longest files (the CLI's surface, the
    // compaction tests) take more than five minutes.
    '--test-timeout=900000',
    '--test-concurrency=2',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    `--test-reporter=${reporter}`,
    `--test-reporter-destination=${countsFile}`,
    ...files,
  ],
  { cwd: root, stdio: 'inherit' },
);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
const code = await new Promise<number | null>((resolve, reject) => {
  child.once('error', reject);
  child.once('close', resolve);
});

const text = fs.existsSync(countsFile) ? fs.readFileSync(countsFile, 'utf8').trim() : '';
fs.rmSync(path.dirname(countsFile), { recursive: true, force: true });
if (text === '') {
  console.error(`✖ the test runner exited (${String(code)}) without a summary`);
  process.exit(1);
}
const counts = JSON.parse(text.split('\n').at(-1)!) as Counts;
const bad = counts.failed + counts.cancelled;
const extra = [counts.skipped && `${counts.skipped} skipped`, counts.todo && `${counts.todo} todo`].filter(
  Boolean,
);
if (bad > 0) {
  console.error(
    `✖ ${bad} of ${counts.tests} tests failed: ${counts.failed} failed, ${counts.cancelled} cancelled` +
      (extra.length ? ` (${extra.join(', ')})` : ''),
  );
  process.exit(1);
}
if (code !== 0) {
  console.error(`✖ every test passed but the test runner exited with ${String(code)}`);
  process.exit(1);
}
console.log(
  `✔ ${counts.passed} of ${counts.tests} tests passed` + (extra.length ? ` (${extra.join(', ')})` : ''),
);
