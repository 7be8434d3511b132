import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { freePort } from 'knotless-devnet';
import { knotless } from './helpers/cli.ts';
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
    assert.match(unknown.stderr, /Unknown command "frobnicate"; run `knotless help`\./);
    const missing = await knotless(['repo', 'create'], { env });
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /usage: knotless repo create <name>/);
    const flag = await knotless(['repo', 'list', '--bogus'], { env });
    assert.equal(flag.code, 2);
  });

  it('prints help', async () => {
    const res = await knotless(['help'], { env: t.env() });
    assert.equal(res.code, 0);
    assert.match(res.stdout, /repo create <name>/);
  });
});
