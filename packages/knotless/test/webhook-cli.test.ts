// `knotless webhook`: the CLI manages a repository's webhooks at a real appview over XRPC, each call
// with a service-auth token the user's own PDS signs for the appview's DID and the method. A real
// receiver on loopback (the appview runs with --dev, which allows it) gets the signed ping.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Appview } from '../../knotless-serve/src/appview.ts';
import { appviewOn, waitFor } from '../../knotless-serve/test/helpers.ts';
import { signatureHolds, startReceiver, type Receiver } from '../../knotless-serve/test/webhook-receiver.ts';
import { knotless, type Run } from './helpers/cli.ts';
import { useForgeNet } from './helpers/forge.ts';

let app: Appview | undefined;
const {
  t,
  users: [alice, bob],
} = useForgeNet(['alice.test', 'bob.test'], () => app?.url);
let rx: Receiver;

interface Listed {
  id: string;
  url: string;
  createdAt: string;
  lastDelivery?: { event: string; state: string; status: number | null };
}

/** A --json run's value: one JSON line alone on stdout, messages (if any) on stderr. */
function json<T>(r: Run): T {
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^[[{].*[\]}]\n$/);
  assert.doesNotMatch(r.stderr, /^[[{]/m);
  return JSON.parse(r.stdout) as T;
}

/** One sentence on stderr (after the program's name), nothing on stdout, no stack. */
function oneSentence(r: Run, code: number, words: RegExp): void {
  assert.equal(r.code, code, r.stderr);
  assert.equal(r.stdout, '');
  assert.match(r.stderr.replace(/^knotless: /, ''), words);
  assert.doesNotMatch(r.stderr, /\n {4}at /);
}

describe('knotless webhook', () => {
  before(async () => {
    await t.ready;
    rx = await startReceiver();
    app = await appviewOn(t, ':memory:');
    for (const u of [alice, bob]) assert.equal((await u.knotless('repo', 'create', 'site')).code, 0);
    await waitFor('both repositories indexed', async () =>
      (await app!.index.repo(t.dids['alice.test']!, 'site')) !== undefined &&
      (await app!.index.repo(t.dids['bob.test']!, 'site')) !== undefined
        ? true
        : undefined,
    );
  });
  after(async () => {
    await app?.close();
    await rx?.close();
  });

  let id = '';
  let secret = '';

  it('add prints the secret once; list --json shows the webhook without it', async () => {
    const added = await alice.knotless('webhook', 'add', 'site', '--url', rx.url);
    assert.equal(added.code, 0, added.stderr);
    secret = added.stdout.trim();
    assert.match(secret, /^[0-9a-f]{64}$/);
    const m = /Added webhook (\S+) to site, posting to (\S+);/.exec(added.stderr);
    assert.ok(m, added.stderr);
    id = m[1]!;
    assert.equal(m[2], rx.url);

    const listed = json<Listed[]>(await alice.knotless('webhook', 'list', 'alice.test/site', '--json'));
    assert.deepEqual(
      listed.map((h) => [h.id, h.url, Object.keys(h).includes('secret')]),
      [[id, rx.url, false]],
    );
    const text = await alice.knotless('webhook', 'list', 'site');
    assert.equal(text.code, 0, text.stderr);
    assert.match(
      text.stdout,
      new RegExp(`^${id}  ${rx.url.replace(/[.]/g, '\\.')}  \\S+  no delivery yet\n$`),
    );
  });

  it('test has the appview post a ping signed with that secret, and list shows how it went', async () => {
    const { delivery } = json<{ delivery: string }>(
      await alice.knotless('webhook', 'test', 'site', id, '--json'),
    );
    const ping = await waitFor('the ping', () =>
      Promise.resolve(rx.received.find((r) => r.headers['x-knotless-delivery'] === delivery)),
    );
    assert.equal(ping.headers['x-knotless-event'], 'ping');
    assert.ok(signatureHolds(ping, secret), 'signed with the secret add printed');
    const last = await waitFor('the delivery recorded', async () => {
      const [h] = json<Listed[]>(await alice.knotless('webhook', 'list', 'site', '--json'));
      return h?.lastDelivery?.state === 'delivered' ? h.lastDelivery : undefined;
    });
    assert.deepEqual(last, { event: 'ping', state: 'delivered', status: 204 });
  });

  it("bob cannot manage alice's webhooks, by her name or by the id in his own repository", async () => {
    oneSentence(
      await bob.knotless('webhook', 'list', 'alice.test/site'),
      5,
      /^Only a repository's owner manages its webhooks, and alice\.test\/site is not yours \(you are bob\.test\)\.\n$/,
    );
    // His own `site` has no webhook of that id: the appview looks it up among his repository's only.
    oneSentence(await bob.knotless('webhook', 'remove', 'site', id), 17, /^site has no such webhook; /);
    oneSentence(await bob.knotless('webhook', 'test', 'site', id), 17, /^site has no such webhook; /);
    // A repository he does not have.
    oneSentence(
      await bob.knotless('webhook', 'add', 'nothing', '--url', rx.url),
      7,
      /^The appview at \S+ knows no repository nothing of yours \(bob\.test\); /,
    );
    assert.deepEqual(
      (await app!.index.webhooks.list(t.dids['alice.test']!, 'site')).map((h) => h.id),
      [id],
    );
  });

  it('remove takes the webhook away; removing it again says there is no such webhook', async () => {
    const removed = await alice.knotless('webhook', 'remove', 'site', id);
    assert.equal(removed.code, 0, removed.stderr);
    assert.match(removed.stderr, new RegExp(`^Removed webhook ${id} from site\\.\\n$`));
    assert.deepEqual(json<Listed[]>(await alice.knotless('webhook', 'list', 'site', '--json')), []);
    oneSentence(await alice.knotless('webhook', 'remove', 'site', id), 17, /^site has no such webhook; /);
  });

  it('add --json gives the webhook with the secret it was given', async () => {
    const h = json<{ id: string; url: string; secret: string; createdAt: string }>(
      await alice.knotless('webhook', 'add', 'site', '--url', rx.url, '--secret', 'sesame', '--json'),
    );
    assert.deepEqual([h.url, h.secret], [rx.url, 'sesame']);
    assert.equal((await alice.knotless('webhook', 'remove', 'site', h.id)).code, 0);
  });

  it('says in one sentence what to do without an appview, an unreachable one, or a URL it refuses', async () => {
    // alice.env is her login without the forge's KNOTLESS_APPVIEW.
    oneSentence(
      await knotless(['webhook', 'list', 'site'], { env: alice.env }),
      2,
      /^Webhooks live at an appview and none is configured; set KNOTLESS_APPVIEW to the appview's address \(`knotless dev` sets it\)\.\n$/,
    );
    oneSentence(
      await knotless(['webhook', 'list', 'site'], {
        env: { ...alice.env, KNOTLESS_APPVIEW: 'http://127.0.0.1:1', KNOTLESS_RETRIES: '0' },
      }),
      8,
      /^Could not reach the appview at http:\/\/127\.0\.0\.1:1 \(KNOTLESS_APPVIEW\); /,
    );
    oneSentence(
      await alice.knotless('webhook', 'add', 'site', '--url', 'ftp://example.test/hook'),
      2,
      /^The appview at \S+ refused the URL: /,
    );
    oneSentence(
      await alice.knotless('webhook', 'add', 'site'),
      2,
      /^Give the receiver's address with --url\.\n$/,
    );
  });
});
