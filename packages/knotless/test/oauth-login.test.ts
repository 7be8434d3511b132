// OAuth login against the dev network's PDS and its own OAuth provider, with the consent page driven
// in headless Chromium: login, push and clone with the session, refresh by several processes at once,
// expiry, revocation by logout, and a write outside the granted scopes.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { watchRequests } from 'knotless-devnet';
import { KNOTLESS_OAUTH_SCOPE } from 'knotless-core/forge/oauth-scope';
import { appviewOn, waitFor } from '../../knotless-serve/test/helpers.ts';
import { agentWireView, spawnAgent, startGate } from './helpers/agent.ts';
import { knotless, runProcess } from './helpers/cli.ts';
import { commitFiles, useGitUser } from './helpers/git.ts';
import { startImpostor } from './helpers/impostor.ts';
import { useNetwork } from './helpers/network.ts';
import { approveWith, closeBrowser, denyWith, oauthLogin } from './helpers/oauth-browser.ts';

const t = useNetwork(['alice.test', 'bob.test']);
after(closeBrowser);

const alice = useGitUser(t, 'alice.test', undefined, async (user) => {
  const res = await oauthLogin(user.env, 'alice.test', approveWith(t.password));
  assert.equal(res.code, 0, res.stderr);
  assert.match(res.stderr, /Logged in as alice\.test \(did:plc:[a-z0-9]+\) with OAuth\./);
});

/** The session file of an account in a user's config directory. */
function sessionFile(env: Record<string, string>, did: string): string {
  return path.join(env['KNOTLESS_CONFIG_DIR']!, 'sessions', `${did.replaceAll(':', '_')}.json`);
}

interface OAuthFile {
  kind: string;
  oauth: { dpopJwk: { d?: string }; tokenSet: { expires_at: string; refresh_token: string; scope: string } };
}

function readSession(env: Record<string, string>, did: string): OAuthFile {
  return JSON.parse(fs.readFileSync(sessionFile(env, did), 'utf8')) as OAuthFile;
}

/** Makes the client believe its access token has expired (the server's tokens stay as they are). */
function ageAccessToken(env: Record<string, string>, did: string): void {
  const file = sessionFile(env, did);
  const s = readSession(env, did);
  s.oauth.tokenSet.expires_at = new Date(Date.now() - 60_000).toISOString();
  fs.writeFileSync(file, JSON.stringify(s), { mode: 0o600 });
}

/** Refresh tokens the PDS has seen spent for an account: one row per refresh, in its own database. */
function refreshesSpent(did: string): number {
  const db = new Database(path.join(t.net.dir, 'pds', 'account.sqlite'), { readonly: true });
  try {
    const row = db
      .prepare(
        'SELECT count(*) AS n FROM used_refresh_token u JOIN token k ON k.id = u.tokenId WHERE k.did = ?',
      )
      .get(did) as { n: number };
    return row.n;
  } finally {
    db.close();
  }
}

/** A second user (own config, same account) holding a copy of alice's session file. */
function copyOfAlicesSession(): Record<string, string> {
  const did = t.dids['alice.test']!;
  const env = t.env();
  fs.mkdirSync(path.dirname(sessionFile(env, did)), { recursive: true, mode: 0o700 });
  fs.copyFileSync(sessionFile(alice.env, did), sessionFile(env, did));
  fs.writeFileSync(path.join(env['KNOTLESS_CONFIG_DIR']!, 'current'), `${did}\n`);
  return env;
}

describe('OAuth login', () => {
  it('stores the session 0600 with its DPoP key, and whoami says how it was made and when it ends', async () => {
    const did = t.dids['alice.test']!;
    const file = sessionFile(alice.env, did);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    const s = readSession(alice.env, did);
    assert.equal(s.kind, 'oauth');
    assert.ok(s.oauth.dpopJwk.d, 'the DPoP private key is kept with the session');
    assert.equal(
      s.oauth.tokenSet.scope.split(' ').sort().join(' '),
      [
        'atproto',
        'blob:application/x-git-packed-objects',
        'repo:dev.knotless.comment',
        'repo:dev.knotless.issue',
        'repo:dev.knotless.issue.state',
        'repo:dev.knotless.key',
        'repo:dev.knotless.lfs',
        'repo:dev.knotless.pull',
        'repo:dev.knotless.pull.status',
        'repo:dev.knotless.ref',
        'repo:dev.knotless.refs',
        'repo:dev.knotless.refs.part',
        'repo:dev.knotless.repo',
        'repo:dev.knotless.star',
        'rpc:dev.knotless.webhook.add?aud=*',
        'rpc:dev.knotless.webhook.list?aud=*',
        'rpc:dev.knotless.webhook.remove?aud=*',
        'rpc:dev.knotless.webhook.test?aud=*',
      ].join(' '),
    );
    const who = await alice.knotless('whoami');
    assert.equal(who.code, 0, who.stderr);
    assert.match(who.stdout, new RegExp(`^alice\\.test \\(${did}\\) on ${t.net.pdsUrl}\\n`));
    assert.match(who.stderr, /^Logged in with OAuth on \S+; the session ends by \S+ at the latest/);
    const json = JSON.parse((await alice.knotless('whoami', '--json')).stdout) as {
      method: string;
      expiresAt: string;
    };
    assert.equal(json.method, 'oauth');
    const days = (Date.parse(json.expiresAt) - Date.now()) / 86_400_000;
    assert.ok(days > 13.9 && days <= 14, `ends in ${days} days`);
  });

  it('pushes, creates and clones with the OAuth session (a pack big enough for a blob)', async () => {
    const created = await alice.knotless('repo', 'create', 'oauth-demo');
    assert.equal(created.code, 0, created.stderr);
    const work = alice.dir();
    await alice.ok(work, 'init', '-q');
    // Random bytes do not compress: the pack goes up as a blob, under the blob scope.
    const big = crypto.randomBytes(300_000);
    const head = await commitFiles(alice, work, { 'README.md': '# hi\n', 'data.bin': big }, 'first');
    await alice.ok(work, 'remote', 'add', 'origin', 'knotless://alice.test/oauth-demo');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    const clone = path.join(alice.dir(), 'c');
    await alice.ok(path.dirname(clone), 'clone', '-q', 'knotless://alice.test/oauth-demo', clone);
    assert.equal((await alice.ok(clone, 'rev-parse', 'HEAD')).trim(), head);
    // And a commit without a clone.
    const note = path.join(alice.dir(), 'note.txt');
    fs.writeFileSync(note, 'from repo commit\n');
    const commit = await alice.knotless(
      'repo',
      'commit',
      'oauth-demo',
      '-m',
      'note',
      '--add',
      `note.txt=${note}`,
    );
    assert.equal(commit.code, 0, commit.stderr);
    await alice.ok(clone, 'pull', '-q');
    assert.equal(fs.readFileSync(path.join(clone, 'note.txt'), 'utf8'), 'from repo commit\n');
  });

  it('several processes refreshing at once spend the refresh token once', async () => {
    const did = t.dids['alice.test']!;
    const before = refreshesSpent(did);
    const oldRefresh = readSession(alice.env, did).oauth.tokenSet.refresh_token;
    ageAccessToken(alice.env, did);
    const runs = await Promise.all([1, 2, 3, 4].map(() => alice.knotless('whoami')));
    for (const r of runs) assert.equal(r.code, 0, r.stderr);
    assert.equal(refreshesSpent(did) - before, 1);
    assert.notEqual(readSession(alice.env, did).oauth.tokenSet.refresh_token, oldRefresh);
    // The session still works afterwards (a refresh token spent twice would have revoked it).
    const again = await alice.knotless('whoami');
    assert.equal(again.code, 0, again.stderr);
  });

  it('the agent carries OAuth requests, and repo compact uses the session', async () => {
    const socket = path.join(t.tmpdir(), 'agent.sock');
    const env = { ...alice.env, KNOTLESS_AGENT_SOCKET: socket, KNOTLESS_COMPACT: '0' };
    let agentPid = 0;
    // Who sends the PDS each request, by who holds its connection: the proof the agent carried them.
    const watch = watchRequests(t.net.pdsServer, () => [agentPid]);
    const agent = await spawnAgent(socket, env);
    agentPid = agent.child.pid!;
    try {
      const work = alice.dir();
      await runProcess('git', ['clone', '-q', 'knotless://alice.test/oauth-demo', work], { env });
      for (const n of [1, 2, 3]) {
        fs.writeFileSync(path.join(work, `f${n}.txt`), `${n}\n`);
        await runProcess('git', ['-C', work, 'add', '-A'], { env });
        await runProcess('git', ['-C', work, 'commit', '-q', '-m', `c${n}`], { env });
        const push = await runProcess('git', ['-C', work, 'push', '-q', 'origin', 'main'], { env });
        assert.equal(push.code, 0, push.stderr);
      }
      // Each push's write, signed by the helper with its DPoP key, reached the PDS from the agent.
      // Every attempt counts for who carried it; only the answered ones count as the pushes' writes,
      // since the PDS rotates its DPoP nonce every few minutes and a write sent with the one before
      // is answered 401 use_dpop_nonce and sent again, as OAuth's DPoP says it must be.
      const attempts = (await watch.settled()).filter((r) =>
        r.path.startsWith('/xrpc/com.atproto.repo.putRecord'),
      );
      const writes = attempts.filter((r) => r.status !== undefined && r.status < 300);
      assert.equal(writes.length, 3, JSON.stringify(attempts));
      assert.ok(
        attempts.every((r) => writes.includes(r) || r.status === 401),
        `a write was sent again for a reason other than a new DPoP nonce: ${JSON.stringify(attempts)}`,
      );
      assert.ok(
        attempts.every((r) => r.pid === agentPid),
        `a push went around the agent: ${JSON.stringify(attempts)}`,
      );
      const compact = await knotless(['repo', 'compact', 'oauth-demo'], { env });
      assert.equal(compact.code, 0, compact.stderr);
    } finally {
      watch.stop();
      await agent.stop();
    }
  });

  for (const layout of ['records', 'table'] as const)
    it(`warm pushes through the agent while its event stream lags are one write each (the view follows its own writes), on ref ${layout}`, async () => {
      // The agent's stream runs through a gate the test holds: between two pushes it delivers nothing,
      // as on a loaded machine or a slow network. Each push's write was swapped on the commit its view
      // was at; the next push's view must be at the commit that write made, or its write is refused and
      // sent again.
      const gate = await startGate(t.net.pdsUrl);
      const socket = path.join(t.tmpdir(), 'agent.sock');
      const did = t.dids['alice.test']!;
      // Requests go to the PDS itself (KNOTLESS_SERVICE); the PDS the identity cache names, which the
      // agent follows the stream of, is the gate.
      // On ref records (KNOTLESS_REF_TABLE=0) the commit a view is at is what its own writes move on; on
      // a table, the table's own CID. Either way the agent learns it from the write it carried (an OAuth
      // write is not folded into a group, whose DPoP proof signs its own request), not from the stream.
      const env = {
        ...alice.env,
        KNOTLESS_REF_TABLE: layout === 'table' ? '1' : '0',
        KNOTLESS_AGENT_SOCKET: socket,
        KNOTLESS_COMPACT: '0',
        KNOTLESS_SERVICE: t.net.pdsUrl,
      };
      const identityFile = path.join(alice.env['KNOTLESS_CACHE_DIR']!, 'identity.json');
      const pointAt = (pds: string) => {
        const cache = JSON.parse(fs.readFileSync(identityFile, 'utf8')) as {
          dids: Record<string, { value: { pds: string } }>;
        };
        cache.dids[did]!.value.pds = pds;
        fs.writeFileSync(identityFile, JSON.stringify(cache));
      };
      const pointAtGate = () => pointAt(gate.url);
      const name = `oauth-lag-${layout}`;
      assert.equal((await knotless(['repo', 'create', name], { env })).code, 0);
      const url = `knotless://${did}/${name}`;
      let agentPid = 0;
      const watch = watchRequests(t.net.pdsServer, () => [agentPid]);
      pointAtGate();
      const agent = await spawnAgent(socket, env);
      agentPid = agent.child.pid!;
      try {
        const work = alice.dir();
        await runProcess('git', ['init', '-q', '-b', 'main', work], { env });
        await runProcess('git', ['-C', work, 'remote', 'add', 'origin', url], { env });
        const push = async (n: number) => {
          fs.writeFileSync(path.join(work, `f${n}.txt`), `${n}\n`);
          await runProcess('git', ['-C', work, 'add', '-A'], { env });
          await runProcess('git', ['-C', work, 'commit', '-q', '-m', `c${n}`], { env });
          pointAtGate();
          const res = await runProcess('git', ['-C', work, 'push', '-q', 'origin', 'main'], { env });
          assert.equal(res.code, 0, res.stderr);
          return (await runProcess('git', ['-C', work, 'rev-parse', 'HEAD'], { env })).stdout.trim();
        };
        /** Asks the agent for the view until `at` holds of it. */
        const untilView = async (at: (view: Awaited<ReturnType<typeof agentWireView>>) => boolean) => {
          while (!at(await agentWireView(socket, { did, repo: name, pds: gate.url })))
            await new Promise((r) => setTimeout(r, 100));
        };
        /**
         * The `putRecord`s sent since `from` requests were seen: `n` landed, any other only a resend
         * for a new DPoP nonce (the PDS rotates it every few minutes), each carried by the agent.
         */
        const assertWrites = async (from: number, n: number) => {
          const attempts = (await watch.settled())
            .slice(from)
            .filter((r) => r.path.startsWith('/xrpc/com.atproto.repo.putRecord'));
          assert.equal(attempts.filter((r) => r.status !== undefined && r.status < 300).length, n);
          assert.ok(
            attempts.every((r) => (r.status !== undefined && r.status < 300) || r.status === 401),
            `a write was refused and sent again: ${JSON.stringify(attempts)}`,
          );
          assert.ok(
            attempts.every((r) => r.pid === agentPid),
            `a push went around the agent: ${JSON.stringify(attempts)}`,
          );
        };
        const first = await push(1);
        // The view answers at once with the first push, at the commit the stream delivered.
        await untilView((view) =>
          layout === 'table'
            ? JSON.stringify(view?.table?.value ?? null).includes(first)
            : view?.commit !== undefined && view.refs.some((r) => r.record.target === first),
        );
        const from = (await watch.settled()).length;
        gate.hold();
        try {
          await push(2);
          await push(3);
          await push(4);
        } finally {
          gate.release();
        }
        // One write a push.
        await assertWrites(from, 3);
        if (layout === 'records') {
          // A push that moves two refs is two writes, each a request of its own (signed as it is
          // sent, no group folds them): the one that carries the view's commit goes first, the other
          // once it is answered, so that neither is refused for the other's commit.
          const made = await runProcess('git', ['-C', work, 'push', '-q', 'origin', 'main:two'], { env });
          assert.equal(made.code, 0, made.stderr);
          await untilView(
            (view) => view?.commit !== undefined && view.refs.some((r) => r.record.ref === 'refs/heads/two'),
          );
          const from2 = (await watch.settled()).length;
          fs.writeFileSync(path.join(work, 'f5.txt'), '5\n');
          await runProcess('git', ['-C', work, 'add', '-A'], { env });
          await runProcess('git', ['-C', work, 'commit', '-q', '-m', 'c5'], { env });
          const res = await runProcess('git', ['-C', work, 'push', '-q', 'origin', 'main', 'main:two'], {
            env,
          });
          assert.equal(res.code, 0, res.stderr);
          await assertWrites(from2, 2);
          assert.doesNotMatch(agent.log(), /a push found it stale/);
        }
      } finally {
        watch.stop();
        await agent.stop();
        await gate.close();
        // The later cases reach alice's real PDS: the cache names it again.
        pointAt(t.net.pdsUrl);
      }
    });

  it('refuses a write outside the granted scopes with one sentence naming the scope', async () => {
    // On ref records (KNOTLESS_REF_TABLE=0), so that the repository record alone makes a repository
    // and the refs are a collection of their own to grant or not.
    const bob = t.env({ KNOTLESS_REF_TABLE: '0' });
    const res = await oauthLogin(bob, 'bob.test', approveWith(t.password), [
      '--scope',
      'atproto repo:dev.knotless.repo',
    ]);
    assert.equal(res.code, 0, res.stderr);
    // The repo record is granted; its refs are not.
    const created = await knotless(['repo', 'create', 'narrow'], { env: bob });
    assert.equal(created.code, 0, created.stderr);
    const file = path.join(t.tmpdir(), 'a.txt');
    fs.writeFileSync(file, 'hi\n');
    const commit = await knotless(
      [
        'repo',
        'commit',
        'narrow',
        '-b',
        'main',
        '-m',
        'x',
        '--author',
        'Bob <bob@example.com>',
        '--add',
        `a.txt=${file}`,
      ],
      { env: bob },
    );
    assert.notEqual(commit.code, 0);
    assert.match(
      commit.stderr,
      /Your OAuth session does not grant the scope repo:dev\.knotless\.ref\S* that this needs; run `knotless login bob\.test` again to grant it\./,
    );
    assert.equal(commit.stderr.trim().split('\n').length, 1, commit.stderr);
    // Refs granted but not blobs: a pack too big to go inline is refused naming the blob scope.
    const again = await oauthLogin(bob, 'bob.test', approveWith(t.password), [
      '--scope',
      'atproto repo:dev.knotless.repo repo:dev.knotless.ref',
    ]);
    assert.equal(again.code, 0, again.stderr);
    const big = path.join(t.tmpdir(), 'big.bin');
    fs.writeFileSync(big, crypto.randomBytes(300_000));
    const blob = await knotless(
      [
        'repo',
        'commit',
        'narrow',
        '-b',
        'main',
        '-m',
        'x',
        '--author',
        'Bob <bob@example.com>',
        '--add',
        `big.bin=${big}`,
      ],
      { env: bob },
    );
    assert.notEqual(blob.code, 0);
    assert.match(
      blob.stderr,
      /does not grant the scope blob:application\/x-git-packed-objects that this needs/,
    );
  });

  it('manages webhooks at an appview: service-auth tokens for its methods are in the scope login asks for', async () => {
    const app = await appviewOn(t, ':memory:');
    try {
      const env = { ...alice.env, KNOTLESS_APPVIEW: app.url };
      assert.equal((await knotless(['repo', 'create', 'hooked'], { env })).code, 0);
      await waitFor('the repository indexed', async () =>
        (await app.index.repo(t.dids['alice.test']!, 'hooked')) === undefined ? undefined : true,
      );
      // Nothing listens there: adding and listing post nothing.
      const added = await knotless(
        ['webhook', 'add', 'hooked', '--url', 'http://127.0.0.1:9/hook', '--json'],
        {
          env,
        },
      );
      assert.equal(added.code, 0, added.stderr);
      const { id } = JSON.parse(added.stdout) as { id: string };
      const listed = await knotless(['webhook', 'list', 'hooked', '--json'], { env });
      assert.equal(listed.code, 0, listed.stderr);
      assert.deepEqual(
        (JSON.parse(listed.stdout) as { id: string }[]).map((h) => h.id),
        [id],
      );
      // A session granted knotless's collections only, as logins asked before `knotless webhook`
      // (bob's: a second session of alice's would be a second token the expiry test below counts).
      const narrow = { ...t.env(), KNOTLESS_APPVIEW: app.url };
      const res = await oauthLogin(narrow, 'bob.test', approveWith(t.password), [
        '--scope',
        KNOTLESS_OAUTH_SCOPE,
      ]);
      assert.equal(res.code, 0, res.stderr);
      const refused = await knotless(['webhook', 'list', 'site'], { env: narrow });
      assert.equal(refused.code, 5, refused.stderr);
      assert.match(
        refused.stderr,
        /^knotless: Your OAuth session does not grant the scope rpc:dev\.knotless\.webhook\.list\S* that this needs; run `knotless login bob\.test` again to grant it\.\n$/,
      );
    } finally {
      await app.close();
    }
  });

  it("never sends the session's tokens to another account's server", async () => {
    const impostor = await startImpostor(t.net.plcUrl, 'mallory.test');
    try {
      const url = `knotless://${impostor.did}/x`;
      const dir = alice.dir();
      // Its server lists no records and answers the ref table's read, and then the whole repository's,
      // with an error rather than a signed proof that there is none, so nothing it says is used; what
      // matters is what was sent.
      const listed = await alice.git(dir, 'ls-remote', url);
      assert.match(
        listed.stderr,
        /could not be verified \(the PDS gave no proof that it is absent, and answered HTTP 400 instead of the account's repository\)/,
      );
      await alice.ok(dir, 'init', '-q', 'w');
      await commitFiles(alice, `${dir}/w`, { a: '1' }, 'one');
      const pushed = await alice.git(`${dir}/w`, 'push', url, 'HEAD:refs/heads/main');
      assert.notEqual(pushed.code, 0);
      assert.ok(impostor.methods().includes('com.atproto.repo.listRecords'), 'the impostor was asked');
      for (const r of impostor.requests) {
        assert.equal(r.headers.authorization, undefined, `${r.method} ${r.url} carried a token`);
        assert.equal(r.headers.dpop, undefined, `${r.method} ${r.url} carried a DPoP proof`);
      }
    } finally {
      await impostor.close();
    }
  });

  it('a forged answer on the loopback port neither ends nor takes over the sign-in', async () => {
    const env = t.env();
    const forged: number[] = [];
    const res = await oauthLogin(env, 'bob.test', async (page) => {
      // The loopback client_id names the redirect, and with it the port a hostile page would guess.
      const clientId = new URL(new URL(page.url()).searchParams.get('client_id')!);
      const redirect = new URL(clientId.searchParams.get('redirect_uri')!);
      assert.equal(redirect.hostname, '127.0.0.1');
      for (const q of ['error=access_denied', 'state=forged&code=stolen&iss=http%3A%2F%2Fevil', ''])
        forged.push((await fetch(`${redirect.origin}/callback?${q}`)).status);
      await approveWith(t.password)(page);
    });
    assert.deepEqual(forged, [400, 400, 400]);
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stderr, /Logged in as bob\.test \(did:plc:[a-z0-9]+\) with OAuth\./);
  });

  it('refuses access denied at the consent page with one sentence and stores nothing', async () => {
    const env = t.env();
    const res = await oauthLogin(env, 'bob.test', denyWith(t.password));
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /The sign-in was not approved at \S+ \(access_denied\); nothing was stored\./);
    assert.equal((await knotless(['whoami'], { env })).code, 4);
  });

  it('a login that replaces a session of the other kind revokes the old one at the PDS', async () => {
    const did = t.dids['bob.test']!;
    const env = t.env();
    const copy = (): Record<string, string> => {
      const other = t.env();
      fs.mkdirSync(path.dirname(sessionFile(other, did)), { recursive: true, mode: 0o700 });
      fs.copyFileSync(sessionFile(env, did), sessionFile(other, did));
      fs.writeFileSync(path.join(other['KNOTLESS_CONFIG_DIR']!, 'current'), `${did}\n`);
      return other;
    };
    // OAuth, replaced by an app password: the OAuth session is revoked.
    assert.equal((await oauthLogin(env, 'bob.test', approveWith(t.password))).code, 0);
    const oauthCopy = copy();
    assert.equal((await knotless(['whoami'], { env: oauthCopy })).code, 0);
    const pw = await knotless(['login', 'bob.test', '--app-password', t.password], { env });
    assert.equal(pw.code, 0, pw.stderr);
    const refused = await knotless(['whoami'], { env: oauthCopy });
    assert.equal(refused.code, 4, refused.stderr);
    assert.match(refused.stderr, /Your session for bob\.test has expired or was revoked/);
    // An app password, replaced by OAuth: its refresh token is revoked (its access token, a plain
    // JWT, lives out its two hours; that is how app-password sessions end).
    const { refreshJwt } = JSON.parse(fs.readFileSync(sessionFile(env, did), 'utf8')) as {
      refreshJwt: string;
    };
    assert.equal((await oauthLogin(env, 'bob.test', approveWith(t.password))).code, 0);
    const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.server.refreshSession`, {
      method: 'POST',
      headers: { authorization: `Bearer ${refreshJwt}` },
    });
    assert.equal(res.status, 400);
    assert.match(await res.text(), /Token has been revoked/);
    assert.equal((await knotless(['whoami'], { env })).code, 0);
  });

  it('an expired session says: log in again', async () => {
    const did = t.dids['alice.test']!;
    const env = copyOfAlicesSession();
    // Two weeks passing on the server: its record of the session says it was granted 15 days ago,
    // past a loopback client's session lifetime, so the PDS refuses to refresh it.
    const db = new Database(path.join(t.net.dir, 'pds', 'account.sqlite'));
    const then = new Date(Date.now() - 15 * 86_400_000).toISOString();
    const changed = db
      .prepare('UPDATE token SET createdAt = ?, updatedAt = ? WHERE did = ?')
      .run(then, then, did);
    db.close();
    assert.equal(changed.changes, 1);
    ageAccessToken(env, did);
    const who = await knotless(['whoami'], { env });
    assert.equal(who.code, 4, who.stderr);
    assert.equal(
      who.stderr.trim(),
      'knotless: Your session for alice.test has expired or was revoked; run `knotless login alice.test` again.',
    );
  });

  it('logout revokes the session at the PDS: a copy of it is refused afterwards', async () => {
    // A fresh login, as the previous test ended the last one on the server.
    const res = await oauthLogin(alice.env, 'alice.test', approveWith(t.password));
    assert.equal(res.code, 0, res.stderr);
    const copy = copyOfAlicesSession();
    assert.equal((await knotless(['whoami'], { env: copy })).code, 0);
    const out = await alice.knotless('logout');
    assert.equal(out.code, 0, out.stderr);
    assert.equal(fs.existsSync(sessionFile(alice.env, t.dids['alice.test']!)), false);
    const who = await knotless(['whoami'], { env: copy });
    assert.equal(who.code, 4, who.stderr);
    assert.match(
      who.stderr,
      /Your session for alice\.test has expired or was revoked; run `knotless login alice\.test` again\./,
    );
  });
});
