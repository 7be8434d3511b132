import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { knotless } from './helpers/cli.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork();
let alice: Record<string, string>;
let bob: Record<string, string>;

let aliceToken: string | undefined;

/** Writes a record straight to alice's PDS, as a later issue's ref writes will. */
async function putRecord(collection: string, rkey: string, record: object): Promise<void> {
  if (aliceToken === undefined) {
    const login = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.server.createSession`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: 'alice.test', password: t.password }),
    });
    aliceToken = ((await login.json()) as { accessJwt: string }).accessJwt;
  }
  const accessJwt = aliceToken;
  const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.repo.putRecord`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${accessJwt}` },
    body: JSON.stringify({
      repo: t.dids['alice.test'],
      collection,
      rkey,
      record: { $type: collection, ...record },
    }),
  });
  assert.equal(res.status, 200, await res.text());
}

async function listKeys(collection: string): Promise<string[]> {
  const res = await fetch(
    `${t.net.pdsUrl}/xrpc/com.atproto.repo.listRecords?repo=${t.dids['alice.test']}&collection=${collection}&limit=100`,
  );
  const { records } = (await res.json()) as { records: Array<{ uri: string }> };
  return records.map((r) => r.uri.split('/').pop()!).sort();
}

describe('repo commands', () => {
  before(async () => {
    alice = t.env();
    bob = t.env();
    assert.equal(
      (await knotless(['login', 'alice.test', '--app-password', t.password], { env: alice })).code,
      0,
    );
    assert.equal((await knotless(['login', 'bob.test', '--app-password', t.password], { env: bob })).code, 0);
  });

  it('creates, lists and shows a repository', async () => {
    const created = await knotless(['repo', 'create', 'hello', '--description', 'Hello, world'], {
      env: alice,
    });
    assert.equal(created.code, 0, created.stderr);
    assert.equal(created.stdout, 'knotless://alice.test/hello\n');
    const list = await knotless(['repo', 'list'], { env: alice });
    assert.match(list.stdout, /^hello {2}Hello, world$/m);
    const info = await knotless(['repo', 'info', 'hello', '--json'], { env: alice });
    const json = JSON.parse(info.stdout) as Record<string, unknown>;
    assert.equal(json['name'], 'hello');
    assert.equal(json['description'], 'Hello, world');
    assert.equal(json['owner'], t.dids['alice.test']);
    assert.equal(json['refs'], 0);
    assert.ok(!Number.isNaN(Date.parse(String(json['createdAt']))));
  });

  it("reads another account's repositories without logging in", async () => {
    const anon = t.env();
    const list = await knotless(['repo', 'list', 'alice.test', '--json'], { env: anon });
    assert.equal(list.code, 0, list.stderr);
    assert.deepEqual(
      (JSON.parse(list.stdout) as Array<{ name: string }>).map((r) => r.name),
      ['hello'],
    );
    const info = await knotless(['repo', 'info', 'alice.test/hello'], { env: bob });
    assert.match(info.stdout, /clone +git clone knotless:\/\/alice\.test\/hello/);
  });

  it('refuses a name that is taken', async () => {
    await knotless(['repo', 'create', 'taken'], { env: alice });
    const again = await knotless(['repo', 'create', 'taken'], { env: alice });
    assert.equal(again.code, 6);
    assert.equal(again.stderr, 'knotless: You already have a repository named taken; pick another name.\n');
  });

  it('says when a repository is missing', async () => {
    const res = await knotless(['repo', 'info', 'alice.test/nope'], { env: bob });
    assert.equal(res.code, 7);
    assert.match(
      res.stderr,
      /alice\.test has no repository named nope; check the name with `knotless repo list alice\.test`\./,
    );
    const del = await knotless(['repo', 'delete', 'nope', '--yes'], { env: alice });
    assert.equal(del.code, 7);
  });

  for (const bad of [
    '.',
    '..',
    '',
    'a/b',
    'x'.repeat(101),
    'with space',
    'tilde~',
    'colon:',
    'x.git',
    'ünï',
  ]) {
    it(`refuses the name ${JSON.stringify(bad.length > 20 ? `${bad.slice(0, 8)}…(${bad.length})` : bad)}`, async () => {
      const res = await knotless(['repo', 'create', bad], { env: alice });
      assert.equal(res.code, 2, res.stderr);
      assert.match(res.stderr, /is not a valid repository name: use letters, digits/);
    });
  }

  it('accepts names at the edges of the rules', async () => {
    for (const good of ['a', 'x'.repeat(100), 'a.b_c-d', '.dotfile', 'Mixed.Case']) {
      const res = await knotless(['repo', 'create', good], { env: alice });
      assert.equal(res.code, 0, `${good}: ${res.stderr}`);
    }
  });

  it('deletes a repository with all its ref records, and only its own', async () => {
    // Repositories on ref records, the old layout (a new one starts on a ref table unless told):
    // the ref records written below are then its refs, not records its table makes readers ignore.
    const old = { ...alice, KNOTLESS_REF_TABLE: '0' };
    assert.equal((await knotless(['repo', 'create', 'doomed'], { env: old })).code, 0);
    assert.equal((await knotless(['repo', 'create', 'doomed2'], { env: old })).code, 0);
    const refs = Array.from({ length: 130 }, (_, i) => `doomed~refs_heads_b${i}`);
    for (const k of refs) await putRecord('dev.knotless.ref', k, { ref: k });
    await putRecord('dev.knotless.ref', 'doomed2~refs_heads_main', { ref: 'x' });
    await putRecord('dev.knotless.ref', 'doome~refs_heads_main', { ref: 'x' });
    const info = await knotless(['repo', 'info', 'doomed', '--json'], { env: alice });
    assert.equal((JSON.parse(info.stdout) as { refs: number }).refs, 130);

    const refused = await knotless(['repo', 'delete', 'doomed'], { env: alice });
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /pass --yes/);
    assert.equal(
      (await knotless(['repo', 'delete', 'doomed', '--yes'], { env: bob })).code,
      7,
      'bob deleted alice’s repo',
    );

    const del = await knotless(['repo', 'delete', 'doomed', '--yes'], { env: alice });
    assert.equal(del.code, 0, del.stderr);
    assert.match(del.stderr, /Deleted alice\.test\/doomed \(130 refs\)/);
    assert.deepEqual(
      await listKeys('dev.knotless.ref'),
      ['doome~refs_heads_main', 'doomed2~refs_heads_main'].sort(),
    );
    assert.ok(!(await listKeys('dev.knotless.repo')).includes('doomed'));
    assert.ok((await listKeys('dev.knotless.repo')).includes('doomed2'));
  });
});
