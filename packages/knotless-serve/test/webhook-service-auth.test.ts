// Managing webhooks over XRPC with atproto service auth: alice's PDS signs a token for the
// appview's DID and the method (com.atproto.server.getServiceAuth), and the appview checks it
// against her #atproto key. A token for another audience, another method, a forged one, or none is
// refused with 401; another account manages only its own repositories.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { appviewOn, waitFor } from './helpers.ts';
import { pdsOf } from './web-forge-kit.ts';
import { signatureHolds, startReceiver, type Receiver } from './webhook-receiver.ts';

const t = useNetwork(['alice.test', 'bob.test']);
const alice = useGitUser(t, 'alice.test', () => ({}));
let app: Appview;
let rx: Receiver;
let aud = '';

/** A service-auth token from `handle`'s own PDS, for `audience` and the method `lxm`. */
async function token(handle: string, lxm: string, audience = aud): Promise<string> {
  const pds = await pdsOf(t, handle);
  const login = await fetch(`${pds}/xrpc/com.atproto.server.createSession`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: handle, password: t.password }),
  });
  const { accessJwt } = (await login.json()) as { accessJwt: string };
  const q = new URLSearchParams({ aud: audience, lxm });
  const res = await fetch(`${pds}/xrpc/com.atproto.server.getServiceAuth?${q}`, {
    headers: { authorization: `Bearer ${accessJwt}` },
  });
  assert.equal(res.status, 200, await res.clone().text());
  return ((await res.json()) as { token: string }).token;
}

async function call(
  nsid: string,
  jwt: string | undefined,
  input: Record<string, string>,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const get = nsid.endsWith('.list');
  const res = await fetch(`${app.url}/xrpc/${nsid}${get ? `?${new URLSearchParams(input)}` : ''}`, {
    method: get ? 'GET' : 'POST',
    headers: {
      ...(jwt === undefined ? {} : { authorization: `Bearer ${jwt}` }),
      ...(get ? {} : { 'content-type': 'application/json' }),
    },
    ...(get ? {} : { body: JSON.stringify(input) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('webhooks over XRPC with service auth', () => {
  before(async () => {
    await t.ready;
    rx = await startReceiver();
    app = await appviewOn(t, ':memory:');
    aud = `did:web:localhost%3A${new URL(app.url).port}`;
    assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
    await waitFor('the repository indexed', async () =>
      (await app.index.repo(t.dids['alice.test']!, 'site')) === undefined ? undefined : true,
    );
  });
  after(async () => {
    await app?.close();
    await rx?.close();
  });

  it('alice adds, lists, tests and removes a webhook of her repository', async () => {
    const add = 'dev.knotless.webhook.add';
    const made = await call(add, await token('alice.test', add), { repo: 'site', url: rx.url });
    assert.equal(made.status, 200, JSON.stringify(made.body));
    const secret = String(made.body['secret']);
    assert.match(secret, /^[0-9a-f]{64}$/);
    const id = String(made.body['id']);
    const list = 'dev.knotless.webhook.list';
    const listed = await call(list, await token('alice.test', list), { repo: 'site' });
    assert.equal(listed.status, 200);
    assert.deepEqual(
      (listed.body['webhooks'] as { id: string; url: string; secret?: string }[]).map((h) => [
        h.id,
        h.url,
        h.secret,
      ]),
      [[id, rx.url, undefined]],
    );
    const test = 'dev.knotless.webhook.test';
    assert.equal((await call(test, await token('alice.test', test), { repo: 'site', id })).status, 200);
    const ping = await waitFor('the ping', () => Promise.resolve(rx.received[0]));
    assert.ok(signatureHolds(ping, secret));
    const remove = 'dev.knotless.webhook.remove';
    assert.equal((await call(remove, await token('alice.test', remove), { repo: 'site', id })).status, 200);
    assert.deepEqual(await app.index.webhooks.list(t.dids['alice.test']!, 'site'), []);
  });

  it('refuses no token, another audience, another method, a forged token, and another account', async () => {
    const add = 'dev.knotless.webhook.add';
    const input = { repo: 'site', url: rx.url };
    const refused = async (jwt: string | undefined, why: RegExp) => {
      const r = await call(add, jwt, input);
      assert.equal(r.status, 401, JSON.stringify(r.body));
      assert.equal(r.body['error'], 'AuthRequired');
      assert.match(String(r.body['message']), why);
    };
    await refused(undefined, /needs service auth/);
    await refused(await token('alice.test', add, 'did:web:elsewhere.example'), /audience|aud/i);
    await refused(await token('alice.test', 'dev.knotless.webhook.list'), /lxm|method/i);
    // Alice's token with its payload made to say bob: the signature no longer holds for anyone.
    const [h, p, s] = (await token('alice.test', add)).split('.');
    const claims = JSON.parse(Buffer.from(p!, 'base64url').toString('utf8')) as Record<string, unknown>;
    const forged = Buffer.from(JSON.stringify({ ...claims, iss: t.dids['bob.test'] })).toString('base64url');
    await refused(`${h}.${forged}.${s}`, /signature/i);
    // Bob's own valid token: the repository is alice's, not his.
    const bob = await call(add, await token('bob.test', add), input);
    assert.equal(bob.status, 400);
    assert.equal(bob.body['error'], 'RepoNotFound');
    assert.deepEqual(await app.index.webhooks.list(t.dids['alice.test']!, 'site'), []);
  });
});
