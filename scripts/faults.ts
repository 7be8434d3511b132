// `npm run faults`: the whole fault suite (crash points, PDS faults, hostile data) against a real PDS
// and real git, then a table of every case: what it expects, what it observed. Exits non-zero unless
// every case passed. `npm test` runs the same cases (the same files), without the table.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface Row {
  group: string;
  name: string;
  expected: string;
  observed: string;
}

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const report = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-faults-')), 'report.jsonl');
const started = Date.now();

const code = await new Promise<number>((resolve) => {
  const child = spawn(
    process.execPath,
    [
      '--conditions=development',
      '--test',
      '--test-timeout=600000',
      '--test-concurrency=2',
      '--test-reporter=dot',
      ...[
        'pds',
        'agent',
        'hostile',
        'crash',
        'compact',
        'table-pds',
        'table-agent',
        'table-crash',
        'table-compact',
      ].map((g) => `packages/knotless/test/faults-${g}.test.ts`),
    ],
    {
      cwd: root,
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, KNOTLESS_FAULTS_REPORT: report },
    },
  );
  child.on('close', (c) => resolve(c ?? 1));
});

const rows: Row[] = fs.existsSync(report)
  ? fs
      .readFileSync(report, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Row)
  : [];

/** Wraps text into lines of at most `width` characters, at spaces. */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  return [...lines, line];
}

const widths = [9, 50, 44, 44];
const cell = (cols: string[][], i: number) => cols.map((c, j) => (c[i] ?? '').padEnd(widths[j]!)).join(' │ ');
const rule = widths.map((w) => '─'.repeat(w)).join('─┼─');
const out: string[] = [cell([['group'], ['case'], ['expected'], ['observed']], 0), rule];
let failed = 0;
for (const r of rows) {
  const pass = r.observed === r.expected;
  if (!pass) failed++;
  const cols = [
    [`${pass ? '✔' : '✖'} ${r.group}`],
    wrap(r.name, widths[1]!),
    wrap(r.expected, widths[2]!),
    wrap(r.observed, widths[3]!),
  ];
  const height = Math.max(...cols.map((c) => c.length));
  for (let i = 0; i < height; i++) out.push(cell(cols, i));
}
const seconds = Math.round((Date.now() - started) / 1000);
out.push(rule, `${rows.length - failed} of ${rows.length} cases passed in ${seconds} s.`);
process.stdout.write(out.join('\n') + '\n');
process.exit(code !== 0 || failed > 0 || rows.length === 0 ? 1 : 0);
