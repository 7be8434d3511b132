// Webhooks on the dev network: the appview (dev mode) follows the PDS, a real receiver listens on
// loopback, alice pushes with git and opens issues with the CLI; each event arrives once, signed
// with the webhook's secret, and receivers that hang, fail or redirect hold up no other delivery.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { commitFiles, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { Deliverer } from '../src/webhooks/deliver.ts';
import { webhookTarget } from '../src/webhooks/target.ts';
import { appviewOn, waitFor } from './helpers.ts';
import { signatureHolds, startReceiver, type Received, type Receiver } from './webhook-receiver.ts';

const t = useNetwork(['alice.test']);
const alice = useGitUser(t, 'alice.test', () => ({}));
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-webhooks-'));
const database = path.join(dataDir, 'index.sqlite');
let app: Appview | undefined;
const receivers: Receiver[] = [];

async function receiver(mode?: Parameters<typeof startReceiver>[0]): Promise<Receiver> {
  const r = await startReceiver(mode);
  receivers.push(r);
  return r;
}

const json = (r: Received) => JSON.parse(r.body) as Record<string, unknown>;
const pushesOf = (r: Receiver, ref: string) =>
  r.received.filter((x) => x.headers['x-knotless-event'] === 'push' && json(x)['ref'] === ref);

async function repoKnown(name: string): Promise<void> {
  await waitFor(`the appview to know ${name}`, async () =>
    (await app!.index.repo(t.dids['alice.test']!, name)) === undefined ? undefined : true,
  );
}

describe('webhooks', () => {
  before(async () => {
    await t.ready;
    app = await appviewOn(t, database, dataDir, { webhookTimeoutMs: 2000, webhookRetryMs: 200 });
  });
  after(async () => {
    await app?.close();
    for (const r of receivers) await r.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('posts a push after git push, signed with the secret, once, and not again when the stream and a backfill replay it', async () => {
    const did = t.dids['alice.test']!;
    assert.equal((await alice.knotless('repo', 'create', 'hooked')).code, 0);
    await repoKnown('hooked');
    const rx = await receiver();
    const hook = await app!.index.webhooks.add(did, 'hooked', rx.url);
    const src = alice.dir();
    await alice.ok(src, 'init', '-q');
    await commitFiles(alice, src, { 'a.txt': 'a\n' }, 'first');
    await commitFiles(alice, src, { 'b.txt': 'b\n' }, 'second');
    await alice.ok(src, 'push', '-q', 'knotless://alice.test/hooked', 'main');
    const head = (await alice.ok(src, 'rev-parse', 'HEAD')).trim();
    const first = (await alice.ok(src, 'rev-parse', 'HEAD~1')).trim();

    const got = await waitFor('the push event', () => Promise.resolve(pushesOf(rx, 'refs/heads/main')[0]));
    assert.ok(signatureHolds(got, hook.secret), 'the signature verifies with the secret');
    assert.ok(!signatureHolds(got, 'another secret'));
    assert.match(String(got.headers['x-knotless-delivery']), /^[0-9a-f-]{36}$/);
    assert.equal(got.headers['content-type'], 'application/json');
    const body = json(got) as {
      repository: { did: string; name: string; handle: string };
      before: string | null;
      after: string;
      pusher: { did: string };
      commits: { id: string; message: string }[];
    };
    assert.deepEqual(
      { ...body.repository, before: body.before, after: body.after, pusher: body.pusher.did },
      { did, handle: 'alice.test', name: 'hooked', before: null, after: head, pusher: did },
    );
    assert.deepEqual(
      body.commits.map((c) => [c.id, c.message]),
      [
        [head, 'second'],
        [first, 'first'],
      ],
    );

    // A second push: its own event, listing only its own commit.
    await commitFiles(alice, src, { 'c.txt': 'c\n' }, 'third');
    await alice.ok(src, 'push', '-q', 'knotless://alice.test/hooked', 'main');
    const third = (await alice.ok(src, 'rev-parse', 'HEAD')).trim();
    const next = await waitFor('the second push event', () =>
      Promise.resolve(pushesOf(rx, 'refs/heads/main').find((x) => json(x)['after'] === third)),
    );
    assert.equal(json(next)['before'], head);
    assert.deepEqual(
      (json(next)['commits'] as { id: string }[]).map((c) => c.id),
      [third],
    );
    assert.ok(signatureHolds(next, hook.secret));

    // The whole stream again from its start, and alice's records read whole: nothing new is sent.
    const service = t.net.pdses[0]!.url.replace(/^http/, 'ws');
    const reached = await app!.index.cursor(service);
    assert.ok(reached !== undefined);
    await app!.close();
    const again = await appviewOn(t, database, dataDir, {
      backfillDids: [did],
      webhookTimeoutMs: 2000,
      webhookRetryMs: 200,
    });
    app = again;
    await again.index.saveCursor({ service, seq: 0 });
    await again.close();
    app = await appviewOn(t, database, dataDir, {
      backfillDids: [did],
      webhookTimeoutMs: 2000,
      webhookRetryMs: 200,
    });
    await waitFor('the replayed stream to reach where it was', async () =>
      ((await app!.index.cursor(service)) ?? 0) >= reached ? true : undefined,
    );
    await app.idle();
    const queued = await app.index.webhooks.deliveries(hook.id);
    assert.equal(queued.length, 2, JSON.stringify(queued));
    assert.equal(pushesOf(rx, 'refs/heads/main').length, 2);
  });

  it('posts issues opened, closed and reopened, and comments', async () => {
    const did = t.dids['alice.test']!;
    assert.equal((await alice.knotless('repo', 'create', 'tracker')).code, 0);
    await repoKnown('tracker');
    const rx = await receiver();
    const hook = await app!.index.webhooks.add(did, 'tracker', rx.url, 'given secret');
    const made = await alice.knotless(
      'issue',
      'create',
      'alice.test/tracker',
      '--title',
      'It breaks',
      '--json',
    );
    assert.equal(made.code, 0, made.stderr);
    const id = (JSON.parse(made.stdout) as { id: string }).id;
    assert.equal(
      (await alice.knotless('issue', 'comment', 'alice.test/tracker', id, '--body', 'seen')).code,
      0,
    );
    assert.equal((await alice.knotless('issue', 'close', 'alice.test/tracker', id)).code, 0);
    assert.equal((await alice.knotless('issue', 'reopen', 'alice.test/tracker', id)).code, 0);
    const events = await waitFor('four events', () =>
      Promise.resolve(rx.received.length >= 4 ? rx.received : undefined),
    );
    const seen = events.map((e) => {
      const b = json(e);
      return `${String(e.headers['x-knotless-event'])} ${String(b['action'])}`;
    });
    // Deliveries go out concurrently: they may arrive in any order.
    assert.deepEqual(seen.sort(), ['comment created', 'issue closed', 'issue opened', 'issue reopened']);
    for (const e of events) assert.ok(signatureHolds(e, 'given secret'));
    const byAction = (a: string) => events.find((e) => json(e)['action'] === a)!;
    const issue = json(byAction('opened'))['issue'] as { title: string; author: { did: string } };
    assert.equal(issue.title, 'It breaks');
    assert.equal(issue.author.did, did);
    assert.equal((json(byAction('created'))['comment'] as { body: string }).body, 'seen');
    assert.equal((json(byAction('closed'))['issue'] as { state: string }).state, 'closed');
    assert.equal((json(byAction('reopened'))['issue'] as { state: string }).state, 'open');
    assert.equal((await app!.index.webhooks.deliveries(hook.id)).length, 4);
  });

  it('posts a pull request opened, its new round, closed, reopened and merged', async () => {
    const did = t.dids['alice.test']!;
    assert.equal((await alice.knotless('repo', 'create', 'prs')).code, 0);
    await repoKnown('prs');
    const rx = await receiver();
    const hook = await app!.index.webhooks.add(did, 'prs', rx.url);
    const src = alice.dir();
    await alice.ok(src, 'init', '-q', '-b', 'main');
    await commitFiles(alice, src, { 'a.txt': 'a\n' }, 'first');
    await alice.ok(src, 'push', '-q', 'knotless://alice.test/prs', 'main');
    await alice.ok(src, 'checkout', '-q', '-b', 'feature');
    await commitFiles(alice, src, { 'b.txt': 'b\n' }, 'feature');
    await alice.ok(src, 'push', '-q', 'knotless://alice.test/prs', 'feature');
    const made = await alice.knotless(
      'pr',
      'create',
      'alice.test/prs',
      '--head',
      'prs:feature',
      '--title',
      'Add b',
      '--json',
    );
    assert.equal(made.code, 0, made.stderr);
    const id = (JSON.parse(made.stdout) as { id: string }).id;
    await commitFiles(alice, src, { 'b.txt': 'b2\n' }, 'feature again');
    await alice.ok(src, 'push', '-q', 'knotless://alice.test/prs', 'feature');
    for (const step of [['update'], ['close'], ['reopen'], ['merge']]) {
      const r = await alice.knotless('pr', step[0]!, 'alice.test/prs', id);
      assert.equal(r.code, 0, `${step[0]}: ${r.stderr}`);
    }
    const pulls = () => rx.received.filter((r) => r.headers['x-knotless-event'] === 'pull_request');
    await waitFor('five pull request events', () => Promise.resolve(pulls().length >= 5 ? true : undefined));
    const seen = pulls()
      .map((r) => {
        const b = json(r) as { action: string; pull: { title: string; rounds: number; state: string } };
        return `${b.action} ${b.pull.title} ${b.pull.rounds} ${b.pull.state}`;
      })
      .sort();
    assert.deepEqual(seen, [
      'closed Add b 2 closed',
      'merged Add b 2 merged',
      'opened Add b 1 open',
      'reopened Add b 2 open',
      'round Add b 2 open',
    ]);
    for (const r of pulls()) assert.ok(signatureHolds(r, hook.secret));
  });

  it("posts a check's verdict when its state changes, not when the same verdict is written again", async () => {
    const did = t.dids['alice.test']!;
    assert.equal((await alice.knotless('repo', 'create', 'checked')).code, 0);
    await repoKnown('checked');
    const rx = await receiver();
    const hook = await app!.index.webhooks.add(did, 'checked', rx.url);
    const src = alice.dir();
    await alice.ok(src, 'init', '-q');
    await commitFiles(alice, src, { 'a.txt': 'a\n' }, 'first');
    await alice.ok(src, 'push', '-q', 'knotless://alice.test/checked', 'main');
    const head = (await alice.ok(src, 'rev-parse', 'HEAD')).trim();
    let last = '';
    for (const state of ['pending', 'success', 'success']) {
      const set = await alice.knotless(
        'check',
        'set',
        'alice.test/checked',
        head,
        '--context',
        'test',
        '--state',
        state,
        '--json',
      );
      assert.equal(set.code, 0, set.stderr);
      last = (JSON.parse(set.stdout) as { uri: string }).uri.split('/').at(-1)!;
    }
    const checks = () => rx.received.filter((r) => r.headers['x-knotless-event'] === 'check');
    // The third verdict indexed (it replaced the second): any event it made is queued by then.
    await waitFor('the last verdict indexed', async () =>
      (await app!.index.db
        .selectFrom('checks')
        .select('rkey')
        .where('rkey', '=', last)
        .executeTakeFirst()) === undefined
        ? undefined
        : true,
    );
    await waitFor('two check events', () => Promise.resolve(checks().length >= 2 ? true : undefined));
    await waitFor('the queue empty', async () =>
      (await app!.index.webhooks.deliveries(hook.id)).every((d) => d.state !== 'pending') ? true : undefined,
    );
    const seen = checks()
      .map(
        (r) =>
          json(r)['check'] as {
            state: string;
            previousState: string | null;
            commit: string;
            context: string;
          },
      )
      .map(
        (c) => `${c.context} ${c.commit === head ? 'head' : c.commit} ${String(c.previousState)}->${c.state}`,
      )
      .sort();
    assert.deepEqual(seen, ['test head null->pending', 'test head pending->success']);
    for (const r of checks()) assert.ok(signatureHolds(r, hook.secret));
  });

  it('a receiver that hangs, fails or redirects delays no other; each is tried three times and logged', async () => {
    const did = t.dids['alice.test']!;
    assert.equal((await alice.knotless('repo', 'create', 'busy')).code, 0);
    await repoKnown('busy');
    const hang = await receiver('hang');
    const fail = await receiver(500);
    const moved = await receiver('redirect');
    const good = await receiver();
    const hooks = {
      hang: await app!.index.webhooks.add(did, 'busy', hang.url),
      fail: await app!.index.webhooks.add(did, 'busy', fail.url),
      moved: await app!.index.webhooks.add(did, 'busy', moved.url),
      good: await app!.index.webhooks.add(did, 'busy', good.url),
    };
    const src = alice.dir();
    await alice.ok(src, 'init', '-q');
    await commitFiles(alice, src, { 'a.txt': 'a\n' }, 'first');
    await alice.ok(src, 'push', '-q', 'knotless://alice.test/busy', 'main');
    await waitFor('the good receiver to have the push', () =>
      Promise.resolve(good.received.length === 1 ? true : undefined),
    );
    // The good receiver was served while the hanging one still held its first post open.
    assert.equal(hang.received.length, 1);
    assert.equal(hang.open(), 1);

    const settled = async (id: string, state: string) =>
      waitFor(`${id}'s delivery to be ${state}`, async () => {
        const [d] = await app!.index.webhooks.deliveries(id);
        return d?.state === state ? d : undefined;
      });
    const failed = await settled(hooks.fail.id, 'failed');
    assert.deepEqual(
      failed.log.map((a) => a.status),
      [500, 500, 500],
    );
    assert.equal(fail.received.length, 3);
    const redirected = await settled(hooks.moved.id, 'failed');
    assert.deepEqual(
      redirected.log.map((a) => [a.status, a.error]),
      Array(3).fill([302, 'the receiver redirected; redirects are not followed']),
    );
    // Never followed: only the hook's own address was asked.
    assert.deepEqual(
      moved.received.map((r) => r.path),
      ['/hook', '/hook', '/hook'],
    );
    const hung = await settled(hooks.hang.id, 'failed');
    assert.deepEqual(
      hung.log.map((a) => [a.status, a.error]),
      Array(3).fill([null, 'no answer within 2 s']),
    );
    const ok = await settled(hooks.good.id, 'delivered');
    assert.deepEqual(
      ok.log.map((a) => a.status),
      [204],
    );
  });

  it('refuses private and loopback receivers outside dev mode, when added and when posting', async () => {
    const rx = await receiver();
    const port = new URL(rx.url).port;
    for (const target of [
      rx.url,
      `http://localhost:${port}/hook`,
      'http://10.1.2.3/hook',
      'http://[::1]/hook',
    ]) {
      const r = await webhookTarget(target, false);
      assert.ok('refused' in r, target);
      assert.match(r.refused, /not public/);
    }
    assert.deepEqual(await webhookTarget(rx.url, true), { url: rx.url });
    assert.match(
      ((await webhookTarget('ftp://example.com/', false)) as { refused: string }).refused,
      /http or https/,
    );
    // A delivery outside dev mode connects only to public addresses, checked at connection time
    // (a name that resolves to loopback after it was added is refused then).
    const strict = new Deliverer(app!.index.webhooks, {
      dev: false,
      timeoutMs: 2000,
      retryMs: 200,
      concurrency: 1,
      commits: () => Promise.resolve([]),
      log: () => {},
    });
    try {
      for (const target of [rx.url, `http://localhost:${port}/hook`]) {
        const out = await strict.post(target, '{}', {});
        assert.equal(out.ok, false);
        assert.match(String(out.error), /not a public address|resolves to 127\.0\.0\.1|resolves to ::1/);
      }
    } finally {
      await strict.close();
    }
    assert.equal(rx.received.length, 0);
  });
});
