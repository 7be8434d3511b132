// As a user would: `knotless dev` runs, repositories are pushed, and then a second appview, the
// installed knotless-serve given only `--relay "$KNOTLESS_DEV_RELAY" --dev --data --port`, finds them
// all and shows a push made after it started.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { KNOTLESS_BIN, runProcess } from '../../knotless/test/helpers/cli.ts';
import { get, waitFor } from '../../knotless-serve/test/helpers.ts';

const SERVE_BIN = path.resolve(import.meta.dirname, '../../knotless-serve/bin/knotless-serve.cjs');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-relay-dev-'));
const children: ChildProcess[] = [];
after(async () => {
  for (const c of children.reverse()) {
    if (c.exitCode !== null) continue;
    const gone = new Promise((r) => c.once('exit', r));
    c.kill('SIGINT');
    await gone;
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Starts a program and resolves with it once its output matches `ready`, and the match. */
async function startUntil(args: string[], ready: RegExp): Promise<RegExpExecArray> {
  const [cmd, ...rest] = args[0] === '/bin/sh' ? args : [process.execPath, ...args];
  const child = spawn(cmd!, rest, {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: dir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  return new Promise((resolve, reject) => {
    const seen = (d: string): void => {
      out += d;
      const m = ready.exec(out);
      if (m !== null) resolve(m);
    };
    child.stdout.setEncoding('utf8').on('data', seen);
    child.stderr.setEncoding('utf8').on('data', seen);
    child.on('exit', (code) => reject(new Error(`${args[0]} exited ${code}: ${out}`)));
  });
}

function shell(script: string) {
  return runProcess('/bin/sh', ['-c', `. '${dir}/dev/env' && ${script}`], {
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: dir },
  });
}

const PUSH = (repo: string, file: string): string =>
  `w=$(mktemp -d) && cd "$w" && git init -q && echo x > ${file} && git add ${file} && ` +
  `git -c user.name=a -c user.email=a@x commit -qm ${file} && ` +
  `git push -q knotless://alice.test/${repo} HEAD:refs/heads/main`;

describe('knotless dev: the relay stand-in', () => {
  it('lets a second appview given only --relay find every repository and follow new pushes', async () => {
    await startUntil([KNOTLESS_BIN, 'dev', '--dir', path.join(dir, 'dev')], /^ready$/m);
    const env = fs.readFileSync(path.join(dir, 'dev', 'env'), 'utf8');
    const relay = /^export KNOTLESS_DEV_RELAY='(http:\/\/[^']+)'$/m.exec(env)?.[1];
    assert.ok(relay, env);
    const before = await shell(
      `knotless repo create one && knotless repo create two && (${PUSH('one', 'first.txt')}) && (${PUSH('two', 'second.txt')})`,
    );
    assert.equal(before.code, 0, before.stderr);

    // In a shell that sourced the env file, as a user runs it: the PLC directory comes from there.
    const m = await startUntil(
      [
        '/bin/sh',
        '-c',
        `. '${dir}/dev/env' && exec '${process.execPath}' '${SERVE_BIN}' --relay "$KNOTLESS_DEV_RELAY" --dev --data '${dir}/serve' --port 0`,
      ],
      /listening on (http:\/\/\S+)/,
    );
    const url = m[1]!;
    const shows = (page: string, text: string): Promise<true> =>
      waitFor(`${page} to show ${text}`, async () => {
        const r = await get(`${url}${page}`);
        return r.status === 200 && r.text.includes(text) ? true : undefined;
      });
    await shows('/alice.test/one', 'first.txt');
    await shows('/alice.test/two', 'second.txt');

    const later = await shell(`knotless repo create three && (${PUSH('three', 'third.txt')})`);
    assert.equal(later.code, 0, later.stderr);
    await shows('/alice.test/three', 'third.txt');
  });
});
