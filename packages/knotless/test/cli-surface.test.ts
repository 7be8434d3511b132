// The CLI's surface as a new user meets it, walked from the command table itself, so that a command
// added later cannot miss any of it: help in every spelling, within 80 columns; each group listing
// its subcommands; one sentence and the usage status for every mistake in the words.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { isKnotlessError } from 'knotless-core/errors';
import { EXIT_CODES } from 'knotless-core/exit-codes';
import { parseRepoSpec } from 'knotless-core/records/name';
import type { Command } from '../src/cli/command.ts';
import { COMMANDS, GROUPS } from '../src/cli/table.ts';
import { knotless, type Run } from './helpers/cli.ts';

const home = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-surface-'));
after(() => fs.rmSync(home, { recursive: true, force: true }));

// No network at all: nothing here may need one (a PLC that refuses would show up as exit 8).
const env = {
  PATH: process.env['PATH'] ?? '/usr/bin:/bin',
  HOME: home,
  KNOTLESS_CONFIG_DIR: path.join(home, 'config'),
  KNOTLESS_CACHE_DIR: path.join(home, 'cache'),
  KNOTLESS_PLC_URL: 'http://127.0.0.1:9',
  KNOTLESS_AGENT: '0',
};
const run = (...words: string[]): Promise<Run> => knotless(words, { env });
const USAGE = EXIT_CODES['usage'];

const table: Array<[string, Command]> = await Promise.all(
  Object.entries(COMMANDS).map(async ([name, load]) => [name, (await load()).command] as [string, Command]),
);

function assertNarrow(out: string, what: string): void {
  for (const line of out.split('\n')) assert.ok(line.length <= 80, `${what}: over 80 columns: ${line}`);
}

/** A mistake: nothing on stdout, one line on stderr naming `word` and pointing at `help`, exit 2. */
function assertMistake(res: Run, word: string, help: string, what: string): void {
  assert.equal(res.code, USAGE, `${what}: ${res.stderr}`);
  assert.equal(res.stdout, '', what);
  assert.match(res.stderr, /^knotless: [^\n]+\n$/, `${what}: one line`);
  assert.ok(res.stderr.includes(word), `${what}: names ${word}: ${res.stderr}`);
  assert.ok(res.stderr.includes(`\`${help}\``), `${what}: points at ${help}: ${res.stderr}`);
  assert.doesNotMatch(res.stderr, /error:|Error|at .+:\d+:\d+|\[object/, what);
}

describe('the command table', () => {
  it('has a module for every name, named as the table names it, with its options documented', () => {
    assert.ok(table.length > 20);
    for (const [name, c] of table) {
      assert.equal(c.name, name);
      assert.ok(/^[a-z]/.test(c.summary) && !c.summary.endsWith('.'), `${name}: summary style`);
      for (const [opt, spec] of Object.entries(c.options ?? {})) {
        assert.ok(spec.help.length > 0, `${name} --${opt} has help`);
        assert.notEqual(opt, 'help', `${name}: --help is everyone's`);
        assert.notEqual(spec.short, 'h', `${name}: -h is everyone's`);
      }
    }
  });

  it('gives every first word of a subcommand something to do alone (a group, or a command)', () => {
    for (const [name] of table) {
      const first = name.split(' ')[0]!;
      assert.ok(GROUPS[first] !== undefined || COMMANDS[first] !== undefined, name);
    }
    for (const group of Object.keys(GROUPS)) assert.equal(COMMANDS[group], undefined, group);
  });

  it('has every command documented under a heading of docs/reference/cli.md', () => {
    const doc = fs.readFileSync(new URL('../../../docs/reference/cli.md', import.meta.url), 'utf8');
    const headings = doc.split('\n').filter((l) => l.startsWith('#'));
    for (const [name] of table) {
      const named = new RegExp(`\`knotless ${name}(\`| )`);
      assert.ok(
        headings.some((h) => named.test(h)),
        `docs/reference/cli.md has a heading for knotless ${name}`,
      );
    }
  });

  it('gives every listing and info command --json', () => {
    for (const [name, c] of table) {
      if (/^(list|show|say whether)/.test(c.summary) || /\b(list|info|view|status)$|^whoami$/.test(name)) {
        assert.equal(c.options?.['json']?.type, 'boolean', `${name} has --json`);
      }
    }
  });
});

describe('help and mistakes, for every command', () => {
  for (const [name, c] of table) {
    const words = name.split(' ');
    it(`knotless ${name}`, async () => {
      const help = await run(...words, '--help');
      assert.equal(help.code, 0, help.stderr);
      assert.equal(help.stderr, '');
      assert.match(help.stdout, new RegExp(`^usage: knotless ${name}( |\\n)`));
      for (const opt of Object.keys(c.options ?? {})) assert.ok(help.stdout.includes(`--${opt}`), opt);
      // Subcommands are named in their parent's help (`knotless agent --help` lists status and stop).
      for (const [sub] of table.filter(([n]) => n.startsWith(`${name} `)))
        assert.match(help.stdout, new RegExp(`^ {2}${sub.slice(name.length + 1)} `, 'm'), sub);
      assertNarrow(help.stdout, `${name} --help`);
      for (const other of [
        [...words, '-h'],
        ['help', ...words],
        [...words, 'x', '--nope', '--help'],
      ]) {
        const same = await run(...other);
        assert.equal(same.code, 0, other.join(' '));
        assert.equal(same.stdout, help.stdout, other.join(' '));
      }

      await Promise.all([
        run(...words, '--no-such-option').then((res) =>
          assertMistake(res, '--no-such-option', `knotless ${name} --help`, `${name} --no-such-option`),
        ),
        run(...words, '-Z').then((res) => assertMistake(res, '-Z', `knotless ${name} --help`, `${name} -Z`)),
        c.positionals.max === Infinity
          ? undefined
          : run(...words, ...Array.from({ length: c.positionals.max + 1 }, (_, i) => `extra${i}`)).then(
              (res) =>
                assertMistake(res, `not ${c.positionals.max + 1}`, `knotless ${name} --help`, 'too many'),
            ),
        c.positionals.min === 0
          ? undefined
          : run(...words).then((res) => assertMistake(res, 'not 0', `knotless ${name} --help`, 'too few')),
        ...Object.entries(c.options ?? {}).map(([opt, spec]) =>
          spec.type === 'string'
            ? // A string option at the end, without its value.
              run(...words, ...Array.from({ length: c.positionals.min }, () => 'a'), `--${opt}`).then((res) =>
                assertMistake(res, `--${opt} needs a value`, `knotless ${name} --help`, `--${opt}`),
              )
            : spec.optionalValue === true
              ? undefined // takes a value or none: login's test covers it
              : run(...words, `--${opt}=yes`).then((res) =>
                  assertMistake(res, `--${opt} takes no value`, `knotless ${name} --help`, `--${opt}=yes`),
                ),
        ),
      ]);
    });
  }
});

describe('the words around the commands', () => {
  it('lists each group with every subcommand the table has, alone and with help', async () => {
    for (const group of Object.keys(GROUPS)) {
      const listing = await run(group);
      assert.equal(listing.code, 0, group);
      assert.equal(listing.stderr, '');
      assertNarrow(listing.stdout, group);
      const subs = table.filter(([n]) => n.startsWith(`${group} `)).map(([n]) => n.slice(group.length + 1));
      assert.ok(subs.length > 0);
      for (const sub of subs)
        assert.match(listing.stdout, new RegExp(`^ {2}${sub} `, 'm'), `${group} ${sub}`);
      for (const other of [
        [group, '--help'],
        [group, '-h'],
        ['help', group],
        [group, 'help'],
      ])
        assert.equal((await run(...other)).stdout, listing.stdout, other.join(' '));
      assertMistake(await run(group, 'frobnicate'), '"frobnicate"', `knotless ${group} --help`, group);
      assertMistake(await run(group, '--frobnicate'), '--frobnicate', `knotless ${group} --help`, group);
    }
  });

  it('answers help in every spelling with the overview, naming every command', async () => {
    const overview = await run('--help');
    assert.equal(overview.code, 0);
    assertNarrow(overview.stdout, 'overview');
    for (const [name] of table) assert.match(overview.stdout, new RegExp(`^ {2}${name} `, 'm'), name);
    for (const words of [[], ['-h'], ['help'], ['help', 'help'], ['help', '--help']]) {
      const same = await run(...words);
      assert.equal(same.code, 0, words.join(' '));
      assert.equal(same.stdout, overview.stdout, words.join(' '));
    }
  });

  it('says which word is wrong at the top level, pointing at --help', async () => {
    assertMistake(await run('frobnicate'), '"frobnicate"', 'knotless --help', 'unknown command');
    assertMistake(await run('--frobnicate'), '--frobnicate', 'knotless --help', 'unknown option');
    assertMistake(await run('-Z'), '-Z', 'knotless --help', 'unknown short option');
    assertMistake(await run('help', 'frobnicate'), '"frobnicate"', 'knotless --help', 'help for nothing');
    assertMistake(await run('REPO', 'list'), '"REPO"', 'knotless --help', 'commands are lower case');
  });

  it('prints the version alone on stdout', async () => {
    const pkg = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    for (const flag of ['--version', '-V']) {
      const res = await run(flag);
      assert.deepEqual(res, { code: 0, stdout: `knotless ${pkg.version}\n`, stderr: '' });
    }
  });
});

describe('repository arguments', () => {
  it('takes name, handle/name and the knotless:// URL that repo create printed, and refuses more', () => {
    assert.deepEqual(parseRepoSpec('knotless://alice.test/hello'), { owner: 'alice.test', name: 'hello' });
    for (const bad of ['alice.test/x/y', 'knotless://alice.test', 'knotless://alice.test/a/b', '/x', 'a/']) {
      assert.throws(
        () => parseRepoSpec(bad),
        (e) => isKnotlessError(e, 'usage') || isKnotlessError(e, 'invalid-name'),
        bad,
      );
    }
  });

  it('says a path of three parts is no repository, not that its first two are no handle', async () => {
    const res = await run('repo', 'info', 'alice.test/x/y');
    assert.equal(res.code, USAGE);
    assert.equal(res.stdout, '');
    assert.match(
      res.stderr,
      /^knotless: "alice\.test\/x\/y" is not a repository; write handle\/name .+\.\n$/,
    );
  });
});

describe('knotless dev, given a directory it cannot make', () => {
  it('says so in one sentence with the dev-network status, not an internal error', async () => {
    const file = path.join(home, 'a-file');
    fs.writeFileSync(file, '');
    const res = await run('dev', '--dir', path.join(file, 'dev'));
    assert.equal(res.code, EXIT_CODES['dev-network'], res.stderr);
    assert.equal(res.stdout, '');
    assert.equal(
      res.stderr,
      `knotless: Could not make the directory ${path.join(file, 'dev')} (ENOTDIR); choose another --dir.\n`,
    );
  });
});
