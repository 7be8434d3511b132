// The README's one-minute tour, run as printed: its shell blocks, read from README.md itself, in a
// fresh HOME with only the system's PATH, against the network `npm start` runs (`knotless dev` with
// its default directory). If the README and the code disagree, this fails.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { KNOTLESS_BIN, runProcess } from './helpers/cli.ts';

const home = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-tour-'));
const SYSTEM_PATH = '/usr/local/bin:/usr/bin:/bin';
let dev: ChildProcess | undefined;
after(async () => {
  // The tour's first push started an agent, which would otherwise wait 10 minutes for another.
  await runProcess('/bin/sh', ['-c', '. ~/.local/share/knotless/dev/env && knotless agent stop'], {
    env: { PATH: SYSTEM_PATH, HOME: home },
  });
  if (dev !== undefined && dev.exitCode === null) {
    const exited = new Promise((resolve) => dev!.once('exit', resolve));
    dev.kill('SIGINT');
    await exited;
  }
  fs.rmSync(home, { recursive: true, force: true });
});

/** The tour's shell blocks: those after "A one-minute tour", up to the real network's. */
function tourBlocks(): string[] {
  const readme = fs.readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
  const start = readme.indexOf('## A one-minute tour');
  const end = readme.indexOf('On the real network');
  assert.ok(start > 0 && end > start, 'the README has its tour');
  return [...readme.slice(start, end).matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** `npm start` is `knotless dev` (`package.json`): started the same way, waiting for `ready`. */
async function startDev(): Promise<void> {
  const pkg = JSON.parse(fs.readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
    scripts: Record<string, string>;
  };
  assert.equal(pkg.scripts['start'], 'node packages/knotless/bin/knotless.cjs dev');
  const child = spawn(process.execPath, [KNOTLESS_BIN, 'dev'], {
    env: { PATH: SYSTEM_PATH, HOME: home },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  dev = child;
  let out = '';
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  await new Promise<void>((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (/^ready$/m.test(out)) resolve();
    });
    child.on('exit', (code) => reject(new Error(`knotless dev exited ${code}: ${err}`)));
  });
}

describe("the README's tour", () => {
  it('works command by command as printed', async () => {
    const blocks = tourBlocks();
    assert.equal(blocks.length, 4, 'the tour, the bot, the fork and pull request, a second maintainer');
    // The one placeholder: the id `pr create` printed goes where the README writes <id>. And the
    // appview follows the PDS's event stream a moment behind (the README says so): before each
    // command that reads it, wait (10 s at most) until it has what the command reads.
    const until = (check: string) =>
      `i=0; until ${check}; do i=$((i+1)); [ $i -lt 100 ] || exit 99; sleep 0.1; done`;
    const script = blocks
      .join('\n')
      .replace(/^(knotless pr create .*?)(\s+#.*)?$/m, 'id=$($1)')
      .replaceAll('<id>', '"$id"')
      .replace(
        /^git clone \$KNOTLESS_APPVIEW\//m,
        `${until('git ls-remote "$KNOTLESS_APPVIEW/alice.test/hello" 2>/dev/null | grep -q main')}\n$&`,
      )
      .replace(
        /^knotless pr list alice\.test\/hello/m,
        `${until('knotless pr list alice.test/hello 2>/dev/null | grep -q "More words"')}\n$&`,
      );
    assert.equal(script.match(/^i=0; until/gm)?.length, 2, script);
    assert.ok(script.includes('id=$(knotless pr create') && script.includes('"$id"'), script);
    await startDev();
    const work = path.join(home, 'work');
    fs.mkdirSync(work);
    // `set -x` shows which command failed; `-e` stops there.
    const res = await runProcess('/bin/sh', ['-exc', script], {
      env: { PATH: SYSTEM_PATH, HOME: home },
      cwd: work,
    });
    assert.equal(res.code, 0, res.stderr);
    // Nothing fails or warns; the only lines of ours are the compare link a new branch gets.
    assert.doesNotMatch(res.stderr, /^knotless: (?!$|Create a pull request for 'typo'| +http:\S+$)/m);
    // What the comments promise.
    assert.match(res.stdout, /^alice\.test \(did:plc:[a-z2-7]+\) on http:\/\/localhost:\d+$/m);
    assert.match(res.stdout, /^knotless:\/\/alice\.test\/hello$/m);
    assert.match(res.stdout, /^ {2}description +my first repository$/m);
    assert.match(res.stdout, /^[0-9a-f]{40}$/m, 'repo commit prints the new commit id');
    assert.match(res.stdout, /^agent \d+ \(build /m, 'the first push started the agent');
    // `pr list`: short id, id, state, title, author, time opened in UTC.
    assert.match(
      res.stdout,
      /^[a-z2-7]{4,} +did:plc:[a-z2-7]+\/[a-z2-7]+ +open +More words +\(bob\.test\) +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/m,
    );
    for (const copy of ['hello-copy', 'hello-plain'])
      assert.equal(fs.readFileSync(path.join(work, copy, 'README.md'), 'utf8'), '# hello\n');
    // A second maintainer: the list names bob, and bob's push with alice's URL reached alice's clone.
    assert.match(res.stdout, /^bob\.test +did:plc:[a-z2-7]+ +since \S+$/m);
    // hello started on its ref table (repo create): nothing in the tour had to move it there.
    assert.doesNotMatch(res.stderr, /moved (the )?\d+ ref\(s\)/);
    assert.match(res.stderr, /^alice\.test\/hello: bob\.test is a maintainer now/m);
    // The merge made bob's commit alice's main, and bob then pushed and committed as a maintainer; a
    // pull brings them.
    const pulled = await runProcess(
      '/bin/sh',
      ['-c', '. ~/.local/share/knotless/dev/env && git -C hello pull -q && git -C hello log --format=%s'],
      { env: { PATH: SYSTEM_PATH, HOME: home }, cwd: work },
    );
    assert.equal(pulled.code, 0, pulled.stderr);
    assert.equal(pulled.stdout, 'notes from bob\nfrom bob, a maintainer\nmore words\nfrom a bot\nfirst\n');
  });
});
