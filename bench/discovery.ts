// `npm run bench:discovery -- [--repos 20] [--json FILE]`: how long a new appview given only
// `--relay` takes to show every repository of a two-PDS network (pushed before it started), which is
// also how long rebuilding an appview from nothing takes; and how long after a push's commit on the
// PDS its page shows it. The appview is the installed bundle, in its own process.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startNetwork, startRelay } from 'knotless-devnet';
import { runKnotless } from '../packages/knotless-devnet/src/dev/run-knotless.ts';

const { values } = parseArgs({
  options: { repos: { type: 'string', default: '20' }, json: { type: 'string' } },
});
const REPOS = Number(values.repos);
const log = (line: string): void => void process.stderr.write(`bench:discovery: ${line}\n`);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-bench-discovery-'));
const net = await startNetwork({ dir: path.join(dir, 'net'), pdses: 2 });
const password = 'bench-password';
const users = ['alice.test', 'bob.test'];
const envs = new Map<string, Record<string, string>>();
for (const [i, handle] of users.entries()) {
  await net.ensureAccount(handle, password, i);
  envs.set(handle, {
    KNOTLESS_PLC_URL: net.plcUrl,
    KNOTLESS_DEV_PDS: net.pdses[i]!.url,
    KNOTLESS_CONFIG_DIR: path.join(dir, handle, 'config'),
    KNOTLESS_CACHE_DIR: path.join(dir, handle, 'cache'),
    KNOTLESS_AGENT_IDLE: '0',
    GIT_AUTHOR_NAME: 'Bench',
    GIT_AUTHOR_EMAIL: 'bench@example.com',
    GIT_COMMITTER_NAME: 'Bench',
    GIT_COMMITTER_EMAIL: 'bench@example.com',
  });
}
const cli = async (handle: string, args: string[], input = ''): Promise<void> => {
  const r = await runKnotless(args, envs.get(handle)!, input);
  if (r.code !== 0) throw new Error(`knotless ${args.join(' ')}: ${r.lastLine}`);
};
const file = path.join(dir, 'file.txt');
fs.writeFileSync(file, 'content\n');
for (const handle of users) await cli(handle, ['login', handle, '--password'], `${password}\n`);
const repos: { handle: string; name: string }[] = [];
for (let n = 0; n < REPOS; n++) {
  const handle = users[n % 2]!;
  const name = `r${n}`;
  await cli(handle, ['repo', 'create', name]);
  await cli(handle, ['repo', 'commit', name, '-m', 'first', '--add', `file-${n}.txt=${file}`]);
  repos.push({ handle, name });
}
log(`${REPOS} repositories pushed over two PDSes`);

const relay = await startRelay({ pdses: net.pdses.map((p) => p.url) });
const serveBin = path.resolve(import.meta.dirname, '../packages/knotless-serve/bin/knotless-serve.cjs');
const started = performance.now();
const child = spawn(
  process.execPath,
  [
    serveBin,
    '--relay',
    relay.url,
    '--dev',
    '--plc',
    net.plcUrl,
    '--data',
    path.join(dir, 'serve'),
    '--port',
    '0',
  ],
  { stdio: ['ignore', 'ignore', 'pipe'] },
);
let stderr = '';
const url = await new Promise<string>((resolve, reject) => {
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
    const m = /listening on (http:\/\/\S+)/.exec(stderr);
    if (m) resolve(m[1]!);
  });
  child.on('exit', (code) => reject(new Error(`knotless-serve exited ${code}: ${stderr}`)));
});
process.once('exit', () => child.kill('SIGTERM'));
const shows = async (page: string, text: string): Promise<void> => {
  for (;;) {
    const res = await fetch(`${url}${page}`);
    if (res.status === 200 && (await res.text()).includes(text)) return;
    await new Promise((r) => setTimeout(r, 20));
  }
};
await Promise.all(repos.map((r, n) => shows(`/${r.handle}/${r.name}`, `file-${n}.txt`)));
const discovery = (performance.now() - started) / 1000;
log(`every repository shown ${discovery.toFixed(1)} s after the appview started`);

const pushes: number[] = [];
for (let k = 0; k < 5; k++) {
  // A new repository each time: a second `repo commit` to a repository stops here with an internal
  // error (reported), which this bench is not about.
  const handle = users[k % 2]!;
  await cli(handle, ['repo', 'create', `later-${k}`]);
  fs.writeFileSync(file, `later ${k}\n`);
  await cli(handle, ['repo', 'commit', `later-${k}`, '-m', `later ${k}`, '--add', `later-${k}.txt=${file}`]);
  const committed = performance.now();
  await shows(`/${handle}/later-${k}`, `later-${k}.txt`);
  pushes.push(performance.now() - committed);
}
const report = {
  repositories: REPOS,
  pdses: 2,
  discovery_seconds: Number(discovery.toFixed(1)),
  push_visible_ms: pushes.map(Math.round),
  load_average: os.loadavg().map((l) => Number(l.toFixed(1))),
};
const out = JSON.stringify(report, null, 2);
if (values.json !== undefined) fs.writeFileSync(values.json, out + '\n');
process.stdout.write(out + '\n');
child.kill('SIGTERM');
await new Promise((r) => child.once('exit', r));
await relay.close();
await net.close();
fs.rmSync(dir, { recursive: true, force: true });
