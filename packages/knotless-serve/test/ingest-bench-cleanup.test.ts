// `npm run bench:ingest` from a shell that sourced a dev network's env file (a network since
// stopped): the bench runs on its own network whatever KNOTLESS_* variables say, and nothing it
// started (the appview is a process of its own) outlives it, whether it ends, fails or is stopped.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';

const root = path.resolve(import.meta.dirname, '../../..');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-ingest-bench-cleanup-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A dev network's env file, as a shell that sourced it has it: every address a closed port. */
function staleDevEnv(): Record<string, string> {
  const gone = 'http://127.0.0.1:9';
  return {
    KNOTLESS_PLC_URL: gone,
    KNOTLESS_DEV_PDS: gone,
    KNOTLESS_DEV_PDS2: gone,
    KNOTLESS_DEV_RELAY: gone,
    KNOTLESS_APPVIEW: gone,
    KNOTLESS_DEV_PASSWORD: 'dev-stale',
    KNOTLESS_DEV_DIR: path.join(dir, 'stale'),
    KNOTLESS_CONFIG_DIR: path.join(dir, 'stale', 'config'),
    KNOTLESS_CACHE_DIR: path.join(dir, 'stale', 'cache'),
  };
}

/** The processes whose command line names `under`: whatever a bench run with TMPDIR=under started. */
function processesUnder(under: string): string[] {
  const found: string[] = [];
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let cmdline: string;
    try {
      cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    } catch (err) {
      // Gone between the listing and the read: not running, so not left behind.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ESRCH')
        continue;
      throw err;
    }
    if (cmdline.includes(under) && Number(pid) !== process.pid) found.push(`${pid}: ${cmdline}`);
  }
  return found;
}

/** What is left under `under`, stopped (so that a failing run leaves nothing either), as a list. */
function leftBehind(under: string): string[] {
  const left = processesUnder(under);
  for (const p of left) process.kill(Number(p.split(':')[0]), 'SIGKILL');
  return left;
}

/** Runs the bench small, with TMPDIR=tmp and the stale env; `started` is called once its appview runs. */
function bench(tmp: string, started?: (child: ReturnType<typeof spawn>) => void) {
  fs.mkdirSync(tmp, { recursive: true });
  const child = spawn(
    process.execPath,
    [
      '--conditions=development',
      path.join(root, 'bench/ingest.ts'),
      ...['--rates', '200', '--seconds', '2', '--accounts', '1000'],
    ],
    { cwd: root, env: { ...process.env, ...staleDevEnv(), TMPDIR: tmp }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stdout.resume();
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
    const onStarted = started;
    if (onStarted !== undefined && /made \d+ frames/.test(stderr)) {
      started = undefined;
      // The appview is spawned right after the frames are made: wait for its process.
      const check = (): void => {
        if (processesUnder(tmp).some((p) => p.includes('knotless-serve'))) onStarted(child);
        else setTimeout(check, 50);
      };
      check();
    }
  });
  return new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal, stderr })),
  );
}

describe('npm run bench:ingest from a shell with a stopped dev network in its environment', () => {
  it('runs on its own network and leaves nothing running', async () => {
    const tmp = path.join(dir, 'run');
    const r = await bench(tmp);
    assert.deepEqual(leftBehind(tmp), []);
    assert.equal(r.code, 0, r.stderr.slice(-3000));
    assert.deepEqual(fs.readdirSync(tmp), []);
  });

  it('stopped by SIGTERM while its appview runs, stops the appview and removes its folder', async () => {
    const tmp = path.join(dir, 'stopped');
    const r = await bench(tmp, (child) => child.kill('SIGTERM'));
    assert.deepEqual(leftBehind(tmp), []);
    assert.equal(r.code, 143, r.stderr.slice(-3000));
    assert.deepEqual(fs.readdirSync(tmp), []);
  });
});
