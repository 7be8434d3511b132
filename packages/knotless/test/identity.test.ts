// Identity is verified both ways, so a DID document claiming someone else's handle takes
// nothing over; login says where a password goes; one-off credentials stay one-off; the dev
// network's files are private. Real PLC, real PDS, real git and the real helper throughout.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startNetwork, startProxy, type Proxy } from 'knotless-devnet';
import { readConfig } from 'knotless-core/config/env';
import { IdentityResolver } from 'knotless-core/identity/resolver';
import { transportFor } from 'knotless-core/xrpc/transport';
import { knotless, runProcess } from './helpers/cli.ts';
import { startImpostor, victimEnv, type Impostor } from './helpers/impostor.ts';
import { looseModes } from './helpers/modes.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test', 'bob.test']);
let impostor: Impostor;
let proxy: Proxy;

before(async () => {
  await t.ready;
  impostor = await startImpostor(t.net.plcUrl, 'alice.test');
  proxy = await startProxy({ target: t.net.pdsUrl });
  // Alice's repository, made by alice in her own environment.
  const env = t.env();
  assert.equal((await knotless(['login', 'alice.test', '--app-password', t.password], { env })).code, 0);
  const made = await knotless(['repo', 'create', 'mine'], { env });
  assert.equal(made.code, 0, made.stderr);
});
after(async () => {
  await impostor?.close();
  await proxy?.close();
});

const victim = () => victimEnv(t);

/** The DID `knotless repo info` says owns `spec`. */
async function ownerOf(env: Record<string, string>, spec: string): Promise<string> {
  const res = await knotless(['repo', 'info', spec, '--json'], { env });
  assert.equal(res.code, 0, res.stderr);
  return (JSON.parse(res.stdout) as { owner: string }).owner;
}

/** Logs in as alice and checks the password went to her PDS and nowhere near the impostor. */
async function loginReachesAlice(env: Record<string, string>): Promise<void> {
  const before = impostor.requests.length;
  const res = await knotless(['login', 'alice.test', '--app-password', t.password], { env });
  assert.equal(res.code, 0, res.stderr);
  const alice = t.dids['alice.test']!;
  // Where the password goes is said before it goes there.
  assert.ok(
    res.stderr.startsWith(`Logging in as alice.test (${alice}) on ${t.net.pdsUrl}\n`),
    `login did not say where the password goes first:\n${res.stderr}`,
  );
  assert.match(res.stderr, new RegExp(`Logged in as alice\\.test \\(${alice}\\)`));
  const reached = impostor.requests.slice(before);
  assert.deepEqual(
    reached.map((r) => r.url),
    [],
    'login sent requests to the impostor',
  );
  assert.ok(!impostor.requests.some((r) => r.body.includes(t.password)), 'the password reached the impostor');
  const who = await knotless(['whoami'], { env });
  assert.match(who.stdout, new RegExp(`^alice\\.test \\(${alice}\\) on ${t.net.pdsUrl}`));
}

describe('handle takeover through a DID document that claims alice.test', () => {
  it('touching the impostor DID leaves alice.test meaning alice, and her password never reaches the impostor', async () => {
    const env = victim();
    const touched = await runProcess('git', ['ls-remote', `knotless://${impostor.did}/x`], {
      env,
      cwd: env['HOME']!,
    });
    // The helper did reach the impostor's DID document and PDS: the touch happened, and what it
    // names the account by is the DID, since the claimed handle does not resolve back to it.
    assert.ok(impostor.methods().includes('com.atproto.repo.listRecords'), touched.stderr);
    assert.match(touched.stderr, new RegExp(impostor.did));
    assert.doesNotMatch(touched.stderr, /alice\.test/);
    const cache = fs.readFileSync(path.join(env['KNOTLESS_CACHE_DIR']!, 'identity.json'), 'utf8');
    assert.doesNotMatch(cache, /alice\.test/, 'something about the unverified handle was cached');

    assert.equal(await ownerOf(env, 'alice.test/mine'), t.dids['alice.test']);
    await loginReachesAlice(env);
  });

  it('a cache written by an older version, mapping alice.test to the impostor, is not trusted', async () => {
    const env = victim();
    const at = Date.now();
    const poisoned = {
      handles: { 'alice.test': { value: impostor.did, at } },
      dids: { [impostor.did]: { value: { did: impostor.did, handle: 'alice.test', pds: impostor.url }, at } },
    };
    fs.mkdirSync(env['KNOTLESS_CACHE_DIR']!, { recursive: true });
    fs.writeFileSync(path.join(env['KNOTLESS_CACHE_DIR']!, 'identity.json'), JSON.stringify(poisoned));
    assert.equal(await ownerOf(env, 'alice.test/mine'), t.dids['alice.test']);
  });

  it('login resolves afresh: even a current-format cache entry for the handle is not used', async () => {
    const env = victim();
    const at = Date.now();
    const entry = { did: impostor.did, handle: 'alice.test', pds: impostor.url };
    const poisoned = {
      version: 2,
      handles: { 'alice.test': { value: impostor.did, at } },
      dids: { [impostor.did]: { value: entry, at } },
    };
    fs.mkdirSync(env['KNOTLESS_CACHE_DIR']!, { recursive: true });
    fs.writeFileSync(path.join(env['KNOTLESS_CACHE_DIR']!, 'identity.json'), JSON.stringify(poisoned));
    await loginReachesAlice(env);
  });

  it('a DID whose claimed handle does not resolve back is named by its DID; one that does keeps its handle', async () => {
    const env = victim();
    const resolver = new IdentityResolver(readConfig(env), transportFor({ caCerts: undefined }));
    const fake = await resolver.resolve(impostor.did);
    assert.deepEqual(fake, { did: impostor.did, handle: undefined, pds: impostor.url });
    const real = await resolver.resolve(t.dids['alice.test']!);
    assert.deepEqual(real, { did: t.dids['alice.test'], handle: 'alice.test', pds: t.net.pdsUrl });
    // From the cache now, with the same answers.
    assert.equal((await resolver.resolve(impostor.did)).handle, undefined);
    assert.equal((await resolver.resolve('alice.test')).did, t.dids['alice.test']);
    const res = await knotless(['repo', 'info', `${impostor.did}/x`], { env });
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, new RegExp(impostor.did));
    assert.doesNotMatch(res.stderr, /alice\.test/);
  });
});

describe('login by DID', () => {
  it('names an account whose handle does not verify by its DID, and says where the password goes', async () => {
    const env = victim();
    const res = await knotless(['login', impostor.did, '--app-password', 'not-alices'], { env });
    assert.ok(
      res.stderr.startsWith(
        `Logging in as ${impostor.did} (its DID document names no handle that points back to it) on ${impostor.url}\n`,
      ),
      res.stderr,
    );
    assert.match(res.stderr, new RegExp(`Logged in as ${impostor.did}\\.\n$`));
    assert.doesNotMatch(res.stderr, /alice\.test/);
    const who = await knotless(['whoami'], { env });
    assert.equal(who.code, 0, who.stderr);
    assert.equal(who.stdout, `${impostor.did} (${impostor.did}) on ${impostor.url}\n`);
  });
});

describe('one-off credentials (KNOTLESS_IDENTIFIER, KNOTLESS_PASSWORD)', () => {
  const oneOff = { KNOTLESS_IDENTIFIER: 'bob.test', KNOTLESS_PASSWORD: '' };

  it('act for that process only: the saved account, whoami and the session files stay as they were', async () => {
    const env = t.env();
    assert.equal((await knotless(['login', 'alice.test', '--app-password', t.password], { env })).code, 0);
    const current = path.join(env['KNOTLESS_CONFIG_DIR']!, 'current');
    const sessions = path.join(env['KNOTLESS_CONFIG_DIR']!, 'sessions');
    const currentBefore = fs.readFileSync(current, 'utf8');
    const sessionsBefore = fs.readdirSync(sessions);

    const bob = { ...env, ...oneOff, KNOTLESS_PASSWORD: t.password };
    const made = await knotless(['repo', 'create', 'one-off'], { env: bob });
    assert.equal(made.code, 0, made.stderr);
    assert.match(made.stdout, /^knotless:\/\/bob\.test\/one-off$/m);
    assert.match((await knotless(['whoami'], { env: bob })).stdout, /^bob\.test /);

    const who = await knotless(['whoami'], { env });
    assert.equal(who.code, 0, who.stderr);
    assert.match(who.stdout, new RegExp(`^alice\\.test \\(${t.dids['alice.test']}\\)`));
    assert.equal(fs.readFileSync(current, 'utf8'), currentBefore);
    assert.deepEqual(fs.readdirSync(sessions), sessionsBefore);
  });

  it('leave a user who was not logged in still not logged in', async () => {
    const env = t.env();
    const bob = { ...env, ...oneOff, KNOTLESS_PASSWORD: t.password };
    assert.equal((await knotless(['whoami'], { env: bob })).code, 0);
    const who = await knotless(['whoami'], { env });
    assert.equal(who.code, 4, who.stdout);
    assert.match(who.stderr, /You are not logged in/);
  });

  it('reuse their session across processes, and log in again (still one-off) when it has died', async () => {
    const env = t.env({ KNOTLESS_SERVICE: proxy.url });
    const bob = { ...env, ...oneOff, KNOTLESS_PASSWORD: t.password };
    proxy.reset();
    for (let i = 0; i < 3; i++) assert.equal((await knotless(['whoami'], { env: bob })).code, 0);
    assert.equal(proxy.count('com.atproto.server.createSession'), 1, 'each process logged in anew');

    // Kill the stored session the way an expired or revoked one looks: both tokens refused.
    const dir = path.join(env['KNOTLESS_CONFIG_DIR']!, 'one-off', 'sessions');
    const [file] = fs.readdirSync(dir);
    const stored = JSON.parse(fs.readFileSync(path.join(dir, file!), 'utf8')) as Record<string, string>;
    fs.writeFileSync(
      path.join(dir, file!),
      JSON.stringify({ ...stored, accessJwt: 'x.e30.x', refreshJwt: 'x.e30.x' }),
    );
    proxy.reset();
    const again = await knotless(['whoami'], { env: bob });
    assert.equal(again.code, 0, again.stderr);
    assert.equal(proxy.count('com.atproto.server.createSession'), 1);
    assert.equal(fs.existsSync(path.join(env['KNOTLESS_CONFIG_DIR']!, 'current')), false);
    assert.equal((await knotless(['whoami'], { env })).code, 4);
  });
  it('log in once when several processes start at the same time', async () => {
    const env = t.env({ KNOTLESS_SERVICE: proxy.url });
    const bob = { ...env, ...oneOff, KNOTLESS_PASSWORD: t.password };
    proxy.reset();
    // A slow login keeps the window open until every process has reached it.
    proxy.inject({
      nsid: 'com.atproto.server.createSession',
      times: Infinity,
      fault: { kind: 'delay', ms: 2500 },
    });
    const runs = await Promise.all(Array.from({ length: 4 }, () => knotless(['whoami'], { env: bob })));
    proxy.clearFaults();
    for (const r of runs) assert.equal(r.code, 0, r.stderr);
    assert.equal(proxy.count('com.atproto.server.createSession'), 1, 'each process made its own session');
  });
});

describe('dev network files', () => {
  it('are 0600 in 0700 folders, a directory left loose by an older version is tightened, and the umask comes back', async () => {
    // Even a network without privateFiles (as tests run it) lives in a folder only its user can enter.
    assert.equal(fs.statSync(t.net.dir).mode & 0o777, 0o700);
    const dir = path.join(t.tmpdir(), 'old-net');
    fs.mkdirSync(path.join(dir, 'pds'), { recursive: true, mode: 0o755 });
    fs.writeFileSync(path.join(dir, 'pds', 'account.sqlite'), '', { mode: 0o644 });
    fs.chmodSync(dir, 0o755);
    fs.chmodSync(path.join(dir, 'pds'), 0o755);
    const umask = process.umask();
    const net = await startNetwork({ dir, privateFiles: true });
    try {
      // An account made after the start: its actor folder, signing key and store come out private.
      await net.ensureAccount('carol.test', t.password);
      assert.ok(fs.readdirSync(path.join(dir, 'pds', 'actors')).length > 0, 'no actor store was made');
      assert.deepEqual(looseModes(dir), []);
    } finally {
      await net.close();
    }
    assert.equal(process.umask(), umask);
  });
});
