import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { KNOTLESS_BIN, runProcess } from './helpers/cli.ts';
import { looseModes } from './helpers/modes.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-dev-test-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Starts `knotless dev --dir DIR` and waits for its `ready` line. */
async function startDev(): Promise<{ child: ChildProcess; stdout: string; exited: Promise<number | null> }> {
  const child = spawn(process.execPath, [KNOTLESS_BIN, 'dev', '--dir', dir], {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: dir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let stdout = '';
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  await new Promise<void>((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      if (/^ready$/m.test(stdout)) resolve();
    });
    void exited.then((code) => reject(new Error(`knotless dev exited ${code}: ${stderr}`)));
  });
  return { child, stdout, exited };
}

/** Runs a shell script the way a user would, after sourcing DIR/env, with only system paths on PATH. */
function shell(script: string) {
  return runProcess('/bin/sh', ['-c', `. '${dir}/env' && ${script}`], {
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: dir },
  });
}

/** The addresses the env file gives the shell: every server's, which a restart must keep. */
async function addresses(): Promise<string> {
  const res = await shell(
    'echo "$KNOTLESS_PLC_URL $KNOTLESS_DEV_PDS $KNOTLESS_DEV_PDS2 $KNOTLESS_DEV_RELAY $KNOTLESS_APPVIEW"',
  );
  assert.equal(res.code, 0, res.stderr);
  return res.stdout.trim();
}

describe('knotless dev', () => {
  let did = '';
  let before = '';

  it('starts a network, writes a working env file and prints ready', async () => {
    const dev = await startDev();
    assert.match(dev.stdout, /^ready$/m);
    assert.match(dev.stdout, new RegExp(`\\. ${dir}/env`));
    before = await addresses();
    assert.match(before, /^(http:\/\/\S+:\d+ ){4}http:\/\/127\.0\.0\.1:\d+$/);
    const env = fs.readFileSync(path.join(dir, 'env'), 'utf8');
    for (const v of [
      'KNOTLESS_PLC_URL',
      'KNOTLESS_DEV_PDS',
      'KNOTLESS_DEV_PDS2',
      'KNOTLESS_DEV_PASSWORD',
      'KNOTLESS_DEV_DIR',
      'PATH',
    ]) {
      assert.match(env, new RegExp(`^export ${v}=`, 'm'));
    }
    const res = await shell('knotless whoami && knotless repo create hello && knotless repo list');
    assert.equal(res.code, 0, res.stderr);
    const [who, created, listed] = res.stdout.trim().split('\n');
    assert.match(who!, /^alice\.test \(did:plc:[a-z2-7]{24}\) on http:\/\/localhost:\d+$/);
    did = /\((did:plc:[a-z2-7]+)\)/.exec(who!)![1]!;
    assert.equal(created, 'knotless://alice.test/hello');
    assert.equal(listed, 'hello');
    const bob = await shell(
      'knotless login bob.test --app-password "$KNOTLESS_DEV_PASSWORD" && knotless whoami',
    );
    assert.equal(bob.code, 0, bob.stderr);
    assert.match(bob.stdout, /^bob\.test /);
    // Two PDSes: alice on the first, bob on the second; `whoami --json` names the account's.
    const pdses = await shell(
      'echo "$KNOTLESS_DEV_PDS $KNOTLESS_DEV_PDS2" && knotless whoami --json && knotless login alice.test --app-password "$KNOTLESS_DEV_PASSWORD" >/dev/null && knotless whoami --json',
    );
    assert.equal(pdses.code, 0, pdses.stderr);
    const [urls, bobJson, aliceJson] = pdses.stdout.trim().split('\n');
    const [first, second] = urls!.split(' ');
    assert.notEqual(first, second);
    assert.equal((JSON.parse(bobJson!) as { pds: string }).pds, second);
    assert.equal((JSON.parse(aliceJson!) as { pds: string }).pds, first);
    // The PDS's databases, the accounts' keys, sessions, the env file: nothing readable by
    // others. Node makes its compile cache (code caches of the public bundle, no data) with its own
    // modes; it sits inside the 0700 directory all the same.
    assert.deepEqual(looseModes(dir, ['cache/v8']), []);
    // The env file names the network's folder (not the default under HOME): the dev commands need
    // no --dir in a shell that sourced it. bob is left renamed and deactivated: the next start finds
    // his account all the same.
    const states = await shell(
      'knotless dev account bob.test deactivate && knotless dev account bob.test activate && knotless dev account bob.test handle bobby.test && knotless dev account bobby.test deactivate',
    );
    assert.equal(states.code, 0, states.stderr);
    dev.child.kill('SIGINT');
    assert.equal(await dev.exited, 0);
  });

  it('keeps accounts, DIDs, repositories and every address across a restart, and stops on SIGTERM', async () => {
    const dev = await startDev();
    const restarted = await addresses();
    const res = await shell('knotless whoami && knotless repo list');
    dev.child.kill('SIGTERM');
    assert.equal(await dev.exited, 0);
    // The appview's and the relay's too: sign-ins, links and plain clones name the appview's.
    assert.equal(restarted, before);
    assert.match(dev.stdout, new RegExp(`appview +${before.split(' ')[4]!.replace(/\./g, '\\.')}$`, 'm'));
    assert.equal(res.code, 0, res.stderr);
    const [who, listed] = res.stdout.trim().split('\n');
    assert.match(who!, new RegExp(`^alice\\.test \\(${did}\\)`));
    assert.equal(listed, 'hello');
  });

  it('refuses to start twice on one directory', async () => {
    const dev = await startDev();
    const second = await runProcess(process.execPath, [KNOTLESS_BIN, 'dev', '--dir', dir], {
      env: { PATH: '/usr/bin:/bin', HOME: dir },
    });
    assert.equal(second.code, 11);
    assert.match(second.stderr, /A network is already running in .+; stop it first\./);
    dev.child.kill('SIGINT');
    assert.equal(await dev.exited, 0);
  });

  it('migrate and account on a directory where no network runs, or an unknown verb: one sentence each', async () => {
    const env = { PATH: '/usr/bin:/bin', HOME: dir };
    const stopped = await runProcess(
      process.execPath,
      [KNOTLESS_BIN, 'dev', 'migrate', 'alice.test', '--dir', dir],
      {
        env,
      },
    );
    assert.equal(stopped.code, 11);
    assert.equal(
      stopped.stderr,
      `knotless: No network is running in ${dir}; start it with \`knotless dev --dir ${dir}\` first.\n`,
    );
    const account = await runProcess(
      process.execPath,
      [KNOTLESS_BIN, 'dev', 'account', 'alice.test', 'vanish', '--dir', dir],
      { env },
    );
    assert.equal(account.code, 2);
    assert.match(account.stderr, /^knotless: usage: knotless dev account <handle> deactivate\|activate\|/);
    const verb = await runProcess(process.execPath, [KNOTLESS_BIN, 'dev', 'frobnicate', '--dir', dir], {
      env,
    });
    assert.equal(verb.code, 2);
    assert.equal(
      verb.stderr,
      'knotless: Unknown or incomplete dev command "frobnicate"; see knotless dev --help.\n',
    );
  });

  it('is a separate program: a knotless without knotless-devnet beside it says so in one sentence', async () => {
    // An installed knotless: its package (stubs, bundles) alone, with no knotless-dev on PATH.
    const alone = path.join(dir, 'alone', 'knotless');
    const pkg = path.dirname(path.dirname(KNOTLESS_BIN));
    for (const part of ['package.json', 'bin', 'dist'])
      fs.cpSync(path.join(pkg, part), path.join(alone, part), { recursive: true });
    const res = await runProcess(process.execPath, [path.join(alone, 'bin', 'knotless.cjs'), 'dev'], {
      env: { PATH: '/usr/bin:/bin', HOME: dir },
    });
    assert.equal(res.code, 11);
    assert.equal(
      res.stderr,
      'knotless: `knotless dev` needs the knotless-devnet package (the local PLC and PDS), which is not installed here; run `npm install` and `npm start` in the knotless workspace.\n',
    );
    // Neither the dev network nor the appview is part of the CLI's bundle or its dependencies.
    const bundle = fs.readFileSync(path.join(alone, 'dist', 'knotless-main.cjs'), 'utf8');
    assert.doesNotMatch(bundle, /require\("knotless-(devnet|serve)"\)|@atproto\/pds/);
    const manifest = JSON.parse(fs.readFileSync(path.join(alone, 'package.json'), 'utf8')) as Record<
      string,
      Record<string, string> | undefined
    >;
    for (const deps of ['dependencies', 'devDependencies', 'optionalDependencies', 'peerDependencies'])
      for (const name of ['knotless-devnet', 'knotless-serve'])
        assert.equal(manifest[deps]?.[name], undefined);
  });
});
