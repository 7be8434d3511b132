// An account that moves to another PDS: its repositories, forks and pull requests follow it, from
// the same shells as before (warm identity caches, a running agent), and the appview follows too.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Appview } from '../../knotless-serve/src/appview.ts';
import { appviewOn, waitFor, xrpc } from '../../knotless-serve/test/helpers.ts';
import { spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { knotless, runProcess } from './helpers/cli.ts';
import { json, newSite, openPr, tipOf, useForgeNet, type ItemJson } from './helpers/forge.ts';
import { commitFiles } from './helpers/git.ts';
import { approveWith, closeBrowser, oauthLogin } from './helpers/oauth-browser.ts';

let app: Appview | undefined;
let socket = '';
const {
  t,
  users: [alice, bob],
} = useForgeNet(['alice.test', 'bob.test'], () => app?.url);

let agent: RunningAgent | undefined;
let aliceClone = '';
let bobClone = '';
let pr: ItemJson | undefined;
/** Two more shells of alice, logged in before the move: with an app password, and with OAuth. */
let byPassword: Record<string, string> = {};
let byOAuth: Record<string, string> = {};

/** git as alice in the same shell, through her warm agent. */
function agentGit(cwd: string, ...args: string[]) {
  const env = { ...alice.env, KNOTLESS_COMPACT: '0', KNOTLESS_AGENT_SOCKET: socket };
  return runProcess('git', args, { env, cwd });
}

describe('an account that moves to another PDS takes its repositories along', () => {
  before(async () => {
    await t.ready;
    const dataDir = t.tmpdir();
    app = await appviewOn(t, path.join(dataDir, 'index.sqlite'), dataDir);
    socket = path.join(t.tmpdir(), 'agent.sock');
  });
  after(async () => {
    await agent?.stop();
    await app?.close();
    await closeBrowser();
  });

  it('before the move: alice on the first PDS, bob on the second, a fork and a pull request across them', async () => {
    assert.equal(t.pdsOf['alice.test'], t.net.pdses[0]!.url);
    assert.equal(t.pdsOf['bob.test'], t.net.pdses[1]!.url);
    const who = json<{ pds: string }>(await bob.knotless('whoami', '--json'));
    assert.equal(who.pds, t.net.pdses[1]!.url);
    aliceClone = await newSite(alice, 'alice.test');
    json(await bob.knotless('repo', 'fork', 'alice.test/site', '--json'));
    bobClone = bob.dir();
    await bob.ok(bobClone, 'clone', '-q', 'knotless://bob.test/site', '.');
    await commitFiles(bob, bobClone, { 'b.txt': 'from bob\n' }, 'bob adds b');
    await bob.ok(bobClone, 'push', '-q', 'origin', 'HEAD:refs/heads/feature');
    pr = await openPr(bob, 'alice.test/site', 'bob.test/site:feature', 'add b');
    // Warm every cache: both shells have resolved alice to her first PDS.
    assert.match(await bob.ok(bobClone, 'ls-remote', 'knotless://alice.test/site'), /refs\/heads\/main/);
    agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_COMPACT: '0' });
    await commitFiles(alice, aliceClone, { 'warm.txt': 'through the agent\n' }, 'before the move');
    const warm = await agentGit(aliceClone, 'push', '-q', 'origin', 'main');
    assert.equal(warm.code, 0, warm.stderr);
    assert.match(agent.log(), new RegExp(`following ${t.net.pdses[0]!.url}`));
    const listed = await alice.knotless('repo', 'list');
    assert.equal(listed.code, 0, listed.stderr);
    byPassword = t.env();
    const pw = await knotless(['login', 'alice.test', '--app-password', t.password], { env: byPassword });
    assert.equal(pw.code, 0, pw.stderr);
    byOAuth = t.env();
    const oauth = await oauthLogin(byOAuth, 'alice.test', approveWith(t.password));
    assert.equal(oauth.code, 0, oauth.stderr);
    await waitFor('the appview to index the repository', () =>
      xrpc<{ refs: unknown[] }>(app!, 'dev.knotless.getRepo', { actor: 'alice.test', repo: 'site' }).then(
        (r) => (r.refs.length > 0 ? true : undefined),
      ),
    );
  });

  it('knotless dev migrate moves alice by the standard steps and prints each', async () => {
    // From alice's shell, as after sourcing a dev network's env file (which sets the password).
    const res = await knotless(['dev', 'migrate', 'alice.test', '--dir', t.net.dir], {
      env: { ...alice.env, KNOTLESS_DEV_PASSWORD: t.password },
    });
    assert.equal(res.code, 0, res.stderr);
    for (const step of [
      /service-auth token addressed to did:web:localhost%3A\d+/,
      /creating alice\.test \(did:plc:[a-z2-7]+\) on /,
      /importing the repository/,
      /uploaded \d+ blobs? listMissingBlobs named/,
      /asking .* to sign the PLC operation/,
      /submitting it through/,
      /activating alice\.test on/,
      /deactivating alice\.test on/,
    ])
      assert.match(res.stdout, step);
    assert.match(res.stdout, new RegExp(`alice\\.test now lives on ${t.net.pdses[1]!.url}`));
    // The PLC document names the new PDS; the old one reports the account deactivated.
    assert.equal((await t.net.pdsOf(t.dids['alice.test']!)).url, t.net.pdses[1]!.url);
    const status = (await (
      await fetch(`${t.net.pdses[0]!.url}/xrpc/com.atproto.sync.getRepoStatus?did=${t.dids['alice.test']!}`)
    ).json()) as { active: boolean; status?: string };
    assert.deepEqual(status, { did: t.dids['alice.test'], active: false, status: 'deactivated' });
  });

  it('a session saved before the move: one sentence saying to log in again there, for either kind', async () => {
    // Neither shell has heard of the move: their caches still name the old PDS. The old PDS's tokens
    // are not the new one's (each PDS signs its own, and its authorization server keeps its own
    // refresh tokens), so no session can follow the account; the command says so, exit 4.
    const [from, to] = [t.net.pdses[0]!.url, t.net.pdses[1]!.url];
    const moved = `knotless: alice.test moved from ${from} to ${to} since you logged in; log in again there with \`knotless login alice.test\`.`;
    const file = path.join(t.tmpdir(), 'f.txt');
    fs.writeFileSync(file, 'f\n');
    for (const env of [byPassword, byOAuth]) {
      const commit = await knotless(['repo', 'commit', 'site', '-m', 'f', '--add', `f.txt=${file}`], { env });
      assert.equal(commit.code, 4, commit.stderr);
      assert.equal(commit.stderr.trim(), moved);
      const issue = await knotless(['issue', 'create', 'bob.test/site', '--title', 'x'], { env });
      assert.equal(issue.code, 4, issue.stderr);
      assert.equal(issue.stderr.trim(), moved);
    }
    // Logging in again is all it takes.
    const again = await knotless(['login', 'alice.test', '--app-password', t.password], { env: byPassword });
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, new RegExp(`on ${to}`));
    const issue = await knotless(['issue', 'create', 'bob.test/site', '--title', 'after logging in'], {
      env: byPassword,
    });
    assert.equal(issue.code, 0, issue.stderr);
  });

  it('after the move the same shells push, fetch, clone and list, with and without the agent', async () => {
    // Bob's shell still holds alice's old PDS in its cache: the old PDS's answer sends it to the new one.
    await bob.ok(bobClone, 'fetch', '-q', 'knotless://alice.test/site');
    const first = await commitFiles(alice, aliceClone, { 'c.txt': 'after the move\n' }, 'after the move');
    const push = await alice.git(aliceClone, 'push', '-q', 'origin', 'main');
    assert.equal(push.code, 0, push.stderr);
    // The push is in the repository's ref table on the new PDS, read there directly.
    const table = (await (
      await fetch(
        `${t.net.pdses[1]!.url}/xrpc/com.atproto.repo.getRecord?repo=${t.dids['alice.test']!}&collection=dev.knotless.refs&rkey=site`,
      )
    ).json()) as { value: { refs: Array<{ ref: string; target?: string }> } };
    assert.equal(
      table.value.refs.find((r) => r.ref === 'refs/heads/main')?.target,
      first,
      JSON.stringify(table),
    );
    assert.equal(await tipOf(bob, 'knotless://alice.test/site', 'main'), first);

    // Through the agent: it follows alice to her new PDS's event stream.
    const second = await commitFiles(alice, aliceClone, { 'd.txt': 'through the agent\n' }, 'agent push');
    const viaAgent = await agentGit(aliceClone, 'push', '-q', 'origin', 'main');
    assert.equal(viaAgent.code, 0, viaAgent.stderr);
    const fetched = await agentGit(aliceClone, 'fetch', '-q', 'origin');
    assert.equal(fetched.code, 0, fetched.stderr);
    assert.equal(await tipOf(bob, 'knotless://alice.test/site', 'main'), second);
    assert.match(agent!.log(), new RegExp(`following ${t.net.pdses[1]!.url}`));

    const list = await alice.knotless('repo', 'list');
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /^site$/m);
    const file = path.join(t.tmpdir(), 'e.txt');
    fs.writeFileSync(file, 'e\n');
    const commit = await alice.knotless('repo', 'commit', 'site', '-m', 'a file', '--add', `e.txt=${file}`);
    assert.equal(commit.code, 0, commit.stderr);

    // A fresh clone from the new PDS is identical, and fsck is clean.
    const fresh = bob.dir();
    await bob.ok(fresh, 'clone', '-q', 'knotless://alice.test/site', '.');
    await bob.ok(fresh, 'fsck', '--strict');
    await alice.ok(aliceClone, 'pull', '-q', 'origin', 'main');
    assert.equal(
      (await bob.ok(fresh, 'rev-parse', 'HEAD')).trim(),
      (await alice.ok(aliceClone, 'rev-parse', 'HEAD')).trim(),
    );
  });

  it('the fork and the pull request that name alice by DID keep working', async () => {
    const listed = json<ItemJson[]>(await bob.knotless('pr', 'list', 'alice.test/site', '--json'));
    assert.deepEqual(
      listed.map((p) => p.id),
      [pr!.id],
    );
    const view = await alice.knotless('pr', 'view', 'alice.test/site', pr!.id);
    assert.equal(view.code, 0, view.stderr);
    assert.match(view.stdout, /add b/);
    const merged = await alice.knotless('pr', 'merge', 'alice.test/site', pr!.id);
    assert.equal(merged.code, 0, merged.stderr);
    const issue = await bob.knotless(
      'issue',
      'create',
      'alice.test/site',
      '--title',
      'after the move',
      '--json',
    );
    assert.equal(issue.code, 0, issue.stderr);
  });

  it('the appview follows alice to her new PDS and shows the new commit', async () => {
    const tip = await tipOf(bob, 'knotless://alice.test/site', 'main');
    await waitFor('the appview to show the commit pushed after the move', () =>
      xrpc<{ refs: Array<{ ref: string; target?: string }> }>(app!, 'dev.knotless.getRepo', {
        actor: 'alice.test',
        repo: 'site',
      }).then((r) =>
        r.refs.some((x) => x.ref === 'refs/heads/main' && x.target === tip) ? true : undefined,
      ),
    );
  });
  it('moving back to the PDS that holds her deactivated copy brings it up to date and activates it', async () => {
    const [first, second] = [t.net.pdses[0]!.url, t.net.pdses[1]!.url];
    const tip = await tipOf(bob, 'knotless://alice.test/site', 'main');
    const res = await knotless(['dev', 'migrate', 'alice.test', '--dir', t.net.dir], {
      env: { ...alice.env, KNOTLESS_DEV_PASSWORD: t.password },
    });
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /still holds alice\.test \(did:plc:[a-z2-7]+\), deactivated since it left/);
    assert.doesNotMatch(res.stdout, /creating alice\.test/);
    assert.match(res.stdout, new RegExp(`alice\\.test now lives on ${first}`));
    assert.equal((await t.net.pdsOf(t.dids['alice.test']!)).url, first);
    const status = async (pds: string) =>
      (await (
        await fetch(`${pds}/xrpc/com.atproto.sync.getRepoStatus?did=${t.dids['alice.test']!}`)
      ).json()) as { active: boolean; status?: string };
    assert.equal((await status(first)).active, true);
    assert.equal((await status(second)).status, 'deactivated');
    // What she pushed while away is there, and the same shells go on.
    assert.equal(await tipOf(bob, 'knotless://alice.test/site', 'main'), tip);
    await alice.ok(aliceClone, 'pull', '-q', '--no-rebase', 'origin', 'main');
    const next = await commitFiles(alice, aliceClone, { 'g.txt': 'back home\n' }, 'back home');
    const push = await alice.git(aliceClone, 'push', '-q', 'origin', 'main');
    assert.equal(push.code, 0, push.stderr);
    assert.equal(await tipOf(bob, 'knotless://alice.test/site', 'main'), next);
    const fresh = bob.dir();
    await bob.ok(fresh, 'clone', '-q', 'knotless://alice.test/site', '.');
    await bob.ok(fresh, 'fsck', '--strict');
  });
});
