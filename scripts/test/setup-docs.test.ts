// What a new user copies from the READMEs and the appview's reference to install and run things: the
// commands must exist as written (no package the registry does not have, options the programs
// know), and what they leave behind must not show up in `git status`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DOCS = [
  'README.md',
  'packages/knotless/README.md',
  'packages/knotless-serve/README.md',
  'packages/knotless-devnet/README.md',
  'packages/knotless-core/README.md',
  ...fs.readdirSync(path.join(root, 'docs/reference')).map((f) => `docs/reference/${f}`),
  'docs/architecture.md',
].filter((f) => fs.existsSync(path.join(root, f)));

/** The shell commands of a Markdown file's ```sh blocks, continuation lines joined, comments cut. */
function shellCommands(file: string): string[] {
  const text = fs.readFileSync(path.join(root, file), 'utf8');
  const commands: string[] = [];
  for (const [, block] of text.matchAll(/```sh\n([\s\S]*?)```/g)) {
    const joined = block!.replace(/\\\n\s*/g, ' ');
    for (const line of joined.split('\n')) {
      const command = line.replace(/\s+#.*$/, '').trim();
      if (command !== '' && !command.startsWith('#')) commands.push(command);
    }
  }
  return commands;
}

/** Every command of every doc that runs `program`, from the program's name on (one per `&&` part). */
function runsOf(program: string): Array<{ file: string; command: string }> {
  return DOCS.flatMap((file) =>
    shellCommands(file).flatMap((line) =>
      line
        .split(/&&|\|\||;/)
        .map((part) => part.trim())
        .filter((part) => part.startsWith(`${program} `))
        .map((command) => ({ file, command })),
    ),
  );
}

describe('the setup the docs describe', () => {
  it('installs globally only tarballs packed in the repository: no package of that name is published', () => {
    const installs = runsOf('npm').filter(({ command }) => /^npm (install|i) (-g|--global) /.test(command));
    assert.ok(installs.length > 0);
    for (const { file, command } of installs) {
      // What is installed: the arguments after -g, up to the first option.
      const args = command.split(/\s+/).slice(3);
      const firstOption = args.findIndex((arg) => arg.startsWith('-'));
      const named = firstOption === -1 ? args : args.slice(0, firstOption);
      assert.ok(
        named.length > 0 && named.every((arg) => /^\.\/[\w.-]+-\d+\.\d+\.\d+\.tgz$/.test(arg)),
        `${file}: ${command}`,
      );
    }
  });

  it("installs the appview with --nodedir: node-gyp's headers come from the Node that runs it, not the internet", () => {
    const serve = runsOf('npm').filter(({ command }) => /^npm install -g \.\/knotless-serve-/.test(command));
    assert.ok(serve.length > 0);
    for (const { file, command } of serve) assert.match(command, / --nodedir=/, `${file}: ${command}`);
  });

  it('runs knotless-serve with the options it has, through a relay (http(s)) off a dev network, streams at ws(s)', () => {
    const help = spawnSync(
      process.execPath,
      [path.join(root, 'packages/knotless-serve/bin/knotless-serve.cjs'), '--help'],
      { encoding: 'utf8' },
    );
    assert.equal(help.status, 0, help.stderr);
    const known = new Set([...help.stdout.matchAll(/(?:^|\s)(--[a-z-]+)/g)].map((m) => m[1]!));
    assert.ok(known.has('--relay') && known.has('--firehose'), help.stdout);
    const runs = runsOf('knotless-serve');
    assert.ok(runs.length >= 2);
    for (const { file, command } of runs) {
      for (const [, option] of command.matchAll(/\s(--[a-z-]+)/g))
        assert.ok(known.has(option!), `${file}: ${command}: ${option!}`);
      // Off a dev network, an appview finds the accounts it indexes through a relay; a stream
      // alone (--firehose) shows only those that push after it started.
      if (!/\s--dev\b/.test(command)) assert.match(command, /\s--relay[ =]/, `${file}: ${command}`);
      for (const [, value] of command.matchAll(/--relay[ =](\S+)/g))
        assert.match(value!, /^("\$\w+"|https?:\/\/)/, `${file}: ${command}`);
      for (const [, value] of command.matchAll(/--firehose[ =](\S+)/g))
        assert.match(value!, /^("\$\{?\w+.*\}?"|wss?:\/\/)/, `${file}: ${command}`);
    }
  });

  it('says near `npm test` how to run one test file, with a file that exists', () => {
    const one = shellCommands('README.md').filter((c) => /^npm test -- /.test(c));
    assert.ok(one.length > 0);
    for (const command of one)
      for (const file of command.split(/\s+/).slice(3))
        assert.ok(fs.existsSync(path.join(root, file)), `README.md: ${command}: no ${file}`);
  });

  it('ignores the tarballs `npm pack` leaves where it runs', () => {
    for (const tarball of [
      'knotless-0.1.0.tgz',
      'knotless-serve-0.1.0.tgz',
      'packages/knotless/knotless-0.1.0.tgz',
    ]) {
      const r = spawnSync('git', ['check-ignore', '--no-index', '-q', tarball], { cwd: root });
      assert.equal(r.status, 0, `${tarball} is not ignored`);
    }
  });
});
