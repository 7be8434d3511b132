import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import { freePort } from 'knotless-devnet';
import { COMMANDS } from '../src/cli/table.ts';
import { KNOTLESS_BIN, knotless } from './helpers/cli.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test']);

describe('failures a user can cause', () => {
  it('says the PDS is unreachable (exit 8) when nothing answers', async () => {
    const env = t.env();
    assert.equal((await knotless(['login', 'alice.test', '--app-password', t.password], { env })).code, 0);
    const port = await freePort();
    const res = await knotless(['repo', 'create', 'x'], {
      env: { ...env, KNOTLESS_SERVICE: `http://127.0.0.1:${port}`, KNOTLESS_RETRIES: '1' },
    });
    assert.equal(res.code, 8);
    assert.match(
      res.stderr,
      // Refused connections are retried (quickly here), and the message says how often.
      new RegExp(
        `^knotless: Could not reach http://127\\.0\\.0\\.1:${port} \\(ECONNREFUSED\\) after 2 attempts; .+\\.\\n$`,
      ),
    );
  });

  it('says the PLC directory is unreachable when a DID cannot be resolved', async () => {
    const port = await freePort();
    const res = await knotless(['repo', 'list', 'alice.test'], {
      env: t.env({ KNOTLESS_PLC_URL: `http://127.0.0.1:${port}` }),
    });
    assert.equal(res.code, 8);
    assert.match(
      res.stderr,
      /Could not resolve did:plc:.+ at http:\/\/127\.0\.0\.1:\d+ .+KNOTLESS_PLC_URL\./,
    );
  });

  it('explains .test handles outside the dev network', async () => {
    const env = t.env();
    delete env['KNOTLESS_DEV_PDS'];
    const res = await knotless(['repo', 'list', 'alice.test'], { env });
    assert.equal(res.code, 3);
    assert.match(res.stderr, /source the env file that `knotless dev` wrote/);
  });

  it('rejects an invalid handle', async () => {
    const res = await knotless(['repo', 'list', 'not a handle'], { env: t.env() });
    assert.equal(res.code, 3);
    assert.match(res.stderr, /"not a handle" is not a valid handle or DID/);
  });

  it('reports unknown commands and wrong arguments as usage errors (exit 2)', async () => {
    const env = t.env();
    const unknown = await knotless(['frobnicate'], { env });
    assert.equal(unknown.code, 2);
    assert.equal(
      unknown.stderr,
      'knotless: knotless has no command "frobnicate"; run `knotless --help` for the list.\n',
    );
    const sub = await knotless(['repo', 'frobnicate'], { env });
    assert.equal(sub.code, 2);
    assert.match(
      sub.stderr,
      /^knotless: knotless repo has no subcommand "frobnicate"; run `knotless repo --help` for the list\.\n$/,
    );
    const missing = await knotless(['repo', 'create'], { env });
    assert.equal(missing.code, 2);
    assert.match(
      missing.stderr,
      /^knotless: `knotless repo create` takes 1 argument \(<name>\), not 0; run `knotless repo create --help` for its usage\.\n$/,
    );
    const flag = await knotless(['repo', 'list', '--bogus'], { env });
    assert.equal(flag.code, 2);
    // One sentence of ours: no parseArgs text (its quotes did not balance).
    assert.equal(
      flag.stderr,
      'knotless: `knotless repo list` has no option --bogus; run `knotless repo list --help` for its usage.\n',
    );
    const value = await knotless(['repo', 'commit', 'x', '-m'], { env });
    assert.equal(value.code, 2);
    assert.match(value.stderr, /^knotless: -m needs a value; /);
  });

  it('prints help: the overview, each group, each command, within 80 columns', async () => {
    const env = t.env();
    const overview = await knotless(['help'], { env });
    assert.equal(overview.code, 0);
    for (const words of [[], ['--help'], ['-h']]) {
      const same = await knotless(words, { env });
      assert.equal(same.code, 0);
      assert.equal(same.stdout, overview.stdout);
    }
    // The overview's rows are the command table's names, no more and no fewer: a command added to
    // the table is listed, and a row the table does not have fails here naming it.
    const names = Object.keys(COMMANDS);
    const rows = [...overview.stdout.matchAll(/^ {2}([a-z][a-z-]*(?: [a-z][a-z-]*)?)(?: {2,}|$)/gm)].map(
      (m) => m[1]!,
    );
    for (const name of names) assert.ok(rows.includes(name), `the overview lists ${name}`);
    for (const row of rows) assert.ok(names.includes(row), `the overview's ${row} is in the table`);
    const outputs = [overview.stdout];
    for (const group of [['repo'], ['repo', '--help'], ['repo', '-h'], ['help', 'repo']]) {
      const res = await knotless(group, { env });
      assert.equal(res.code, 0, group.join(' '));
      assert.match(res.stdout, /^usage: knotless repo <subcommand>/);
      assert.match(res.stdout, /^ {2}commit +commit files/m);
      outputs.push(res.stdout);
    }
    for (const name of names) {
      const words = name.split(' ');
      for (const flag of ['--help', '-h']) {
        const res = await knotless([...words, flag], { env });
        assert.equal(res.code, 0, `${name} ${flag}`);
        assert.match(res.stdout, new RegExp(`^usage: knotless ${name}`));
        assert.match(res.stdout, /-h, --help +show this help/);
        outputs.push(res.stdout);
      }
      // --help wins over arguments that would be wrong.
      assert.equal((await knotless([...words, '--bogus', '--help'], { env })).code, 0);
      assert.equal((await knotless(['help', ...words], { env })).stdout, outputs[outputs.length - 1]);
    }
    for (const out of outputs)
      for (const line of out.split('\n')) assert.ok(line.length <= 80, `over 80 columns: ${line}`);
  });

  it('ends quietly, as git does, when its reader goes away (knotless --help | head -1)', async () => {
    const { spawn } = await import('node:child_process');
    const child = spawn(process.execPath, [KNOTLESS_BIN, '--help'], {
      env: t.env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // The reading end is gone before the first line is written.
    child.stdout.destroy();
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(stderr, '');
    assert.equal(code, 141);
  });

  it('prints its version', async () => {
    const pkg = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    for (const flag of ['--version', '-V', 'version']) {
      const res = await knotless([flag], { env: t.env() });
      assert.equal(res.code, 0);
      assert.equal(res.stdout, `knotless ${pkg.version}\n`);
    }
  });
});
