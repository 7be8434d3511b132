// Accounts that go away (deactivated, taken down, deleted) and come back, and handles that change:
// what the helper and the CLI say, from a shell that knew the account and from one that did not.
import assert from 'node:assert/strict';
import dns from 'node:dns';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Appview } from '../../knotless-serve/src/appview.ts';
import { appviewOn, get, waitFor } from '../../knotless-serve/test/helpers.ts';
import { readConfig } from 'knotless-core/config/env';
import { KnotlessError } from 'knotless-core/errors';
import { IdentityResolver } from 'knotless-core/identity/resolver';
import { transportFor, type Transport } from 'knotless-core/xrpc/transport';
import { spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { dnsServer, RCODE } from './helpers/dns-server.ts';
import { knotless, runProcess, type Run } from './helpers/cli.ts';
import { newSite, useForgeNet } from './helpers/forge.ts';
import { commitFiles } from './helpers/git.ts';

let app: Appview | undefined;
let appDir = '';
let agent: RunningAgent | undefined;
let socket = '';
let clone = '';

/** Commits and pushes from alice's clone through her agent, which then follows her event stream. */
async function agentPush(file: string): Promise<void> {
  await commitFiles(alice, clone, { [file]: `${file}\n` }, `${file} through the agent`);
  const env = { ...alice.env, KNOTLESS_COMPACT: '0', KNOTLESS_AGENT_SOCKET: socket };
  const pushed = await runProcess('git', ['push', '-q', 'origin', 'main'], { env, cwd: clone });
  assert.equal(pushed.code, 0, pushed.stderr);
}
const {
  t,
  users: [alice, bob],
} = useForgeNet(['alice.test', 'bob.test'], () => app?.url);

/** Waits until the appview (`app` unless another is given) answers `page` with `status` and `text`. */
function pageSays(page: string, status: number, text: RegExp, on = app): Promise<string> {
  return waitFor(`${page} to answer ${status} ${String(text)}`, async () => {
    const got = await get(`${on!.url}${page}`);
    return got.status === status && text.test(got.text) ? got.text : undefined;
  });
}

/** Every mirror the appview keeps, by directory name. */
function mirrors(): string[] {
  const root = path.join(appDir, 'git');
  if (!fs.existsSync(root)) return [];
  // One folder per account (the mirror's template, `.template`, is none).
  return fs
    .readdirSync(root)
    .filter((d) => !d.startsWith('.'))
    .flatMap((d) => fs.readdirSync(path.join(root, d)));
}

/** `knotless dev account …` on the test network, as from a dev network's shell. */
async function devAccount(...args: string[]): Promise<string> {
  const res = await knotless(['dev', 'account', ...args, '--dir', t.net.dir], {
    env: { ...t.env(), KNOTLESS_DEV_PASSWORD: t.password },
  });
  assert.equal(res.code, 0, res.stderr);
  return res.stdout.trim();
}

/** An appview that follows no stream and reads alice's PDS whole at each start, on one database. */
let stillDir = '';
function stillAppview(): Promise<Appview> {
  stillDir ||= t.tmpdir();
  return appviewOn(t, path.join(stillDir, 'index.sqlite'), stillDir, {
    firehoses: [],
    backfillPdses: [t.net.pdses[0]!.url],
  });
}

/** A shell that has never resolved anyone (a cold identity cache). */
function cold(...args: string[]): Promise<Run> {
  return knotless(args, { env: t.env() });
}

/** The one line a failed command printed, checked to be one sentence and not a "not found". */
function sentence(res: Run, code: number): string {
  assert.equal(res.code, code, res.stderr);
  const lines = res.stderr.trim().split('\n');
  assert.equal(lines.length, 1, res.stderr);
  assert.doesNotMatch(lines[0]!, /not found|check its spelling|does not exist/i);
  return lines[0]!;
}

describe('accounts that go away and come back, and handles that change', () => {
  let url = '';
  before(async () => {
    await t.ready;
    appDir = t.tmpdir();
    app = await appviewOn(t, path.join(appDir, 'index.sqlite'), appDir);
    clone = await newSite(alice, 'alice.test');
    url = 'knotless://alice.test/site';
    // Alice's shell has a warm agent, which follows her account's event stream after a push.
    socket = path.join(t.tmpdir(), 'agent.sock');
    agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_COMPACT: '0' });
    await agentPush('b.txt');
    // Bob's shell has resolved alice: a warm cache.
    await bob.ok(bob.dir(), 'ls-remote', url);
    // Alice's record in another account's repository: an issue on bob's.
    await newSite(bob, 'bob.test');
    const issue = await alice.knotless('issue', 'create', 'bob.test/site', '--title', 'from alice');
    assert.equal(issue.code, 0, issue.stderr);
    await pageSays('/alice.test/site', 200, /README\.md/);
    await pageSays('/bob.test/site/issues', 200, /from alice/);
    await pageSays('/bob.test/site', 200, /1 open issue</);
    // A second appview, without a stream, that reads alice's PDS whole at start: it shows her now,
    // and is started again once she is deactivated (it heard no event of it).
    const quiet = await stillAppview();
    await pageSays('/alice.test/site', 200, /README\.md/, quiet);
    await quiet.close();
  });
  after(async () => {
    await agent?.stop();
    await app?.close();
  });

  it('a deactivated account: one sentence naming it and its state, from a warm and a cold shell', async () => {
    assert.equal(
      await devAccount('alice.test', 'deactivate'),
      `alice.test is deactivated on ${t.net.pdsUrl}.`,
    );
    const expected =
      'knotless: The account alice.test is deactivated; its repositories are unavailable until its owner activates it again.';
    assert.equal(sentence(await bob.git(bob.dir(), 'ls-remote', url), 128), expected);
    assert.equal(sentence(await bob.knotless('repo', 'list', 'alice.test'), 18), expected);
    assert.equal(sentence(await bob.knotless('repo', 'info', 'alice.test/site'), 18), expected);
    assert.equal(sentence(await cold('repo', 'list', 'alice.test'), 18), expected);
    // The appview hides her repositories and her records in others' pages.
    await pageSays('/alice.test/site', 410, /The account alice\.test is deactivated/);
    await pageSays('/alice.test', 410, /is deactivated/);
    const issues = await pageSays('/bob.test/site/issues', 200, /issues/i);
    assert.doesNotMatch(issues, /from alice/);
    // Nor does her issue count in bob's repository's totals.
    await pageSays('/bob.test/site', 200, /0 open issues</);
    // The appview that heard nothing asks her PDS at start, and hides her too.
    const quiet = await stillAppview();
    try {
      await pageSays('/alice.test/site', 410, /The account alice\.test is deactivated/, quiet);
    } finally {
      await quiet.close();
    }
  });

  it('reactivated: the same commands work again, nothing lost', async () => {
    assert.equal(
      await devAccount('alice.test', 'activate'),
      `alice.test is active again on ${t.net.pdsUrl}.`,
    );
    assert.match(await bob.ok(bob.dir(), 'ls-remote', url), /refs\/heads\/main/);
    const listed = await cold('repo', 'list', 'alice.test');
    assert.equal(listed.code, 0, listed.stderr);
    assert.equal(listed.stdout.trim(), 'site');
    await pageSays('/alice.test/site', 200, /README\.md/);
    await pageSays('/bob.test/site/issues', 200, /from alice/);
    await pageSays('/bob.test/site', 200, /1 open issue</);
    // A second appview, without a stream, that reads alice's PDS whole at start: it shows her now,
    // and is started again once she is deactivated (it heard no event of it).
    const quiet = await stillAppview();
    await pageSays('/alice.test/site', 200, /README\.md/, quiet);
    await quiet.close();
  });

  it('taken down by its PDS, then restored', async () => {
    await devAccount(t.dids['alice.test']!, 'takedown');
    const down = sentence(await bob.git(bob.dir(), 'ls-remote', url), 128);
    assert.equal(
      down,
      `knotless: The account alice.test has been taken down by its PDS (${t.net.pdsUrl}); its repositories are unavailable.`,
    );
    assert.equal(sentence(await cold('repo', 'list', 'alice.test'), 18), down);
    await pageSays('/alice.test/site', 410, /taken down by its PDS/);
    await devAccount(t.dids['alice.test']!, 'restore');
    assert.match(await bob.ok(bob.dir(), 'ls-remote', url), /refs\/heads\/main/);
    await pageSays('/alice.test/site', 200, /README\.md/);
  });

  it('a new handle is used at once; the old one names nothing; the DID keeps working', async () => {
    // The agent dropped its view at the account events above: a push makes it follow alice again.
    await agentPush('c.txt');
    const heard = (agent!.log().match(/reported a identity event/g) ?? []).length;
    // A third shell, without an agent, resolves alice.test now: its cache pairs the handle with her
    // DID for a day.
    const third = t.env();
    assert.equal((await knotless(['repo', 'list', 'alice.test'], { env: third })).code, 0);
    // A check that cannot reach a PDS it asks proves nothing: the cached pair is used, as before.
    const unsure = await knotless(['repo', 'list', 'alice.test'], {
      env: { ...third, KNOTLESS_DEV_PDS2: 'http://127.0.0.1:9' },
    });
    assert.equal(unsure.code, 0, unsure.stderr);
    const did = t.dids['alice.test']!;
    assert.equal(
      await devAccount('alice.test', 'handle', 'alice2.test'),
      `alice.test is now alice2.test (${did}).`,
    );
    // Bob's shell resolved alice.test before too and runs no agent: the cached pair is verified
    // again beside the first request, and git is handed nothing while it does not hold.
    const gone = `knotless: The handle alice.test no longer belongs to ${did} (it names no account now); run the command again, or name the account by its DID.`;
    assert.equal(sentence(await bob.git(bob.dir(), 'ls-remote', url), 128), gone);
    assert.equal((await bob.knotless('repo', 'list', 'alice.test')).code, 3);
    const renamed = await cold('repo', 'list', 'alice2.test');
    assert.equal(renamed.code, 0, renamed.stderr);
    assert.equal(renamed.stdout.trim(), 'site');
    assert.match(await bob.ok(bob.dir(), 'ls-remote', 'knotless://alice2.test/site'), /refs\/heads\/main/);
    const old = await cold('repo', 'list', 'alice.test');
    assert.equal(old.code, 3, old.stderr);
    // Her own shell resolved alice.test before: its agent heard the identity event and dropped
    // what the cache held, so the old handle names nothing there either, at once.
    await waitFor('the agent to hear the identity event', () =>
      Promise.resolve(
        (agent!.log().match(/reported a identity event/g) ?? []).length > heard ? true : undefined,
      ),
    );
    const warmOld = await alice.knotless('repo', 'list', 'alice.test');
    assert.equal(warmOld.code, 3, warmOld.stderr);
    const byDid = await cold('repo', 'list', t.dids['alice.test']!);
    assert.equal(byDid.code, 0, byDid.stderr);
    // Her own shell: the commands use the handle verified now.
    const mine = await alice.knotless('repo', 'info', 'alice2.test/site');
    assert.equal(mine.code, 0, mine.stderr);
    // The appview: the new handle's pages at once, the old handle's none.
    await pageSays('/alice2.test/site', 200, /README\.md/);
    await pageSays('/alice.test/site', 404, /./);
    await pageSays('/bob.test/site/issues', 200, /alice2\.test/);

    // Someone else takes the old handle: the third shell's cached pair is refused in one sentence
    // naming the new owner, and the next command uses the new owner (who has no repositories).
    const taker = await t.net.ensureAccount('alice.test', t.password, 1);
    assert.notEqual(taker.did, did);
    const taken = await knotless(['repo', 'list', 'alice.test'], { env: third });
    assert.equal(
      sentence(taken, 3),
      `knotless: The handle alice.test no longer belongs to ${did} (it names ${taker.did} now); run the command again, or name the account by its DID.`,
    );
    const theirs = await knotless(['repo', 'list', 'alice.test'], { env: third });
    assert.equal(theirs.code, 0, theirs.stderr);
    assert.equal(theirs.stdout.trim(), '');
  });

  it('deleted: its repositories are gone, said in one sentence', async () => {
    await devAccount('alice2.test', 'delete');
    assert.equal(
      sentence(await bob.git(bob.dir(), 'ls-remote', 'knotless://alice2.test/site'), 128),
      `knotless: The account alice2.test has been deleted from its PDS (${t.net.pdsUrl}); its repositories are gone.`,
    );
    // The appview removes her rows and her mirror.
    assert.ok(mirrors().includes('site.git'));
    await pageSays('/alice2.test/site', 410, /is deleted; its repositories are gone/);
    await waitFor('her mirror to be removed', () =>
      Promise.resolve(mirrors().length === 1 ? true : undefined),
    );
    const issues = await pageSays('/bob.test/site/issues', 200, /issues/i);
    assert.doesNotMatch(issues, /from alice/);
  });
});

describe('a handle its own host serves, of a deactivated account, from a cold cache', () => {
  it('says the account is deactivated, not that the handle does not resolve', async () => {
    // A handle under a PDS's domain resolves through https://<handle>/.well-known/atproto-did, which
    // the PDS stops serving while the account is deactivated. No DNS name nor port 443 can be served
    // on this machine, so the handle's host is a stand-in on loopback, reached through the transport,
    // answering as the reference PDS answers for a deactivated account (no DID at the well-known
    // path; describeRepo: RepoDeactivated, the answer the .test cases above get from the real PDS),
    // and DNS answers NXDOMAIN.
    const host = http.createServer((req, res) => {
      if (req.url?.startsWith('/xrpc/com.atproto.repo.describeRepo?') === true) {
        const body = { error: 'RepoDeactivated', message: 'Repo has been deactivated: alice.example' };
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      } else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => host.listen(0, '127.0.0.1', resolve));
    const hostUrl = `http://127.0.0.1:${(host.address() as { port: number }).port}`;
    const servers = dns.getServers();
    dns.setServers([await dnsServer(RCODE.NXDOMAIN)]);
    try {
      const home = t.tmpdir();
      const config = readConfig({
        HOME: home,
        KNOTLESS_CONFIG_DIR: path.join(home, 'config'),
        KNOTLESS_CACHE_DIR: path.join(home, 'cache'),
        KNOTLESS_PLC_URL: t.net.plcUrl,
      });
      const direct = transportFor(config);
      const transport: Transport = {
        request: (url, init) =>
          direct.request(
            url.hostname === 'alice.example' ? new URL(`${url.pathname}${url.search}`, hostUrl) : url,
            init,
          ),
        close: () => {},
      };
      await assert.rejects(new IdentityResolver(config, transport).resolve('alice.example'), (err) => {
        assert.ok(err instanceof KnotlessError);
        assert.equal(err.code, 'account-inactive');
        assert.equal(
          err.message,
          'The account alice.example is deactivated; its repositories are unavailable until its owner activates it again.',
        );
        return true;
      });
    } finally {
      dns.setServers(servers);
      host.close();
    }
  });
});
