// What verifying a cached handle again costs (configuration.md, "When an account moves or goes
// away"): a warm `git ls-remote` naming the owner by handle (the cached pair is verified afresh
// beside the first request) against the same naming the owner by DID (no check), interleaved, on
// the dev network (two PDSes: each is asked for a `.test` handle). Prints medians of wall time and
// of the CPU time (user+sys) of git and the helper, with the load average.
// Run: npm run bench:handle-recheck [-- --runs N]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startNetwork } from 'knotless-devnet';
import { run } from './client.ts';
import { BIN_SCRIPTS } from '../packages/knotless/src/paths.ts';
import { percentile } from './stats.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '15' } } });
const runs = Number(values.runs);
const net = await startNetwork({ pdses: 2 });
const password = 'bench-password-1';
const { did } = await net.ensureAccount('alice.test', password, 0);
const home = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-recheck-'));
try {
  const bin = path.join(home, 'bin');
  fs.mkdirSync(bin);
  fs.symlinkSync(BIN_SCRIPTS['git-remote-knotless']!, path.join(bin, 'git-remote-knotless'));
  const env = {
    PATH: `${bin}:${process.env['PATH'] ?? '/usr/bin:/bin'}`,
    HOME: home,
    KNOTLESS_CONFIG_DIR: path.join(home, 'config'),
    KNOTLESS_CACHE_DIR: path.join(home, 'cache'),
    KNOTLESS_PLC_URL: net.plcUrl,
    KNOTLESS_DEV_PDS: net.pdses[0]!.url,
    KNOTLESS_DEV_PDS2: net.pdses[1]!.url,
    KNOTLESS_AGENT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_AUTHOR_NAME: 'a',
    GIT_AUTHOR_EMAIL: 'a@example.com',
    GIT_COMMITTER_NAME: 'a',
    GIT_COMMITTER_EMAIL: 'a@example.com',
  };
  const cwd = path.join(home, 'work');
  fs.mkdirSync(cwd);
  const knotless = (args: string[]) =>
    run(process.execPath, [BIN_SCRIPTS['knotless']!, ...args], { cwd, env });
  await knotless(['login', 'alice.test', '--app-password', password]);
  await knotless(['repo', 'create', 'site']);
  await run('git', ['init', '-q', '-b', 'main'], { cwd, env });
  await run('git', ['commit', '-q', '--allow-empty', '-m', 'one'], { cwd, env });
  await run('git', ['push', '-q', 'knotless://alice.test/site', 'main'], { cwd, env });
  const urls = { handle: 'knotless://alice.test/site', did: `knotless://${did}/site` };
  const wall: Record<string, number[]> = { handle: [], did: [] };
  const cpu: Record<string, number[]> = { handle: [], did: [] };
  for (let i = 0; i < runs; i++)
    for (const [name, url] of Object.entries(urls)) {
      const out = path.join(home, 'time');
      const t = await run('/usr/bin/time', ['-f', '%U %S', '-o', out, 'git', 'ls-remote', url], { cwd, env });
      const [user, sys] = fs.readFileSync(out, 'utf8').trim().split('\n').at(-1)!.split(' ').map(Number);
      wall[name]!.push(t.ms);
      cpu[name]!.push((user! + sys!) * 1000);
    }
  console.log(`load average ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
  for (const name of Object.keys(urls))
    console.log(
      `${name}: wall median ${percentile(wall[name]!, 50).toFixed(0)} ms, CPU (user+sys, git and helper) median ${percentile(cpu[name]!, 50).toFixed(0)} ms, ${runs} runs`,
    );
} finally {
  await net.close();
  fs.rmSync(home, { recursive: true, force: true });
}
