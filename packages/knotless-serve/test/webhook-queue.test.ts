// The webhooks' queue on SQLite and on a real PostgreSQL server: an event queued twice is one
// delivery, two processes claiming at once never take the same delivery, a claim whose process
// died is taken again once its lease ran out, and a delivery ends failed after three attempts.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Index } from '../src/db/index-store.ts';
import { openDatabase } from '../src/db/open.ts';
import { MAX_ATTEMPTS, queueEvent } from '../src/db/webhook-store.ts';
import { startPostgres, type PgServer } from './postgres.ts';

let pg: PgServer | undefined;
before(async () => {
  pg = await startPostgres();
});
after(async () => {
  await pg?.stop();
});

async function open(conn: string): Promise<Index> {
  const { db, engine } = await openDatabase(conn);
  return new Index(db, engine);
}

for (const engine of ['sqlite', 'postgres'] as const) {
  describe(`the webhooks' queue on ${engine}`, () => {
    let a: Index;
    let b: Index;
    before(async () => {
      const conn =
        engine === 'postgres'
          ? await pg!.createDatabase('webhooks')
          : path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-webhook-queue-')), 'index.sqlite');
      // Two processes' connections to one index.
      a = await open(conn);
      b = await open(conn);
    });
    after(async () => {
      await a?.close();
      await b?.close();
    });

    it('queues an event once per webhook, however often it is seen', async () => {
      const hook = await a.webhooks.add('did:plc:owner', 'once', 'http://127.0.0.1:9/hook');
      await a.webhooks.add('did:plc:owner', 'elsewhere', 'http://127.0.0.1:9/hook');
      for (let i = 0; i < 3; i++)
        await a.db
          .transaction()
          .execute((tx) =>
            queueEvent(tx, 'did:plc:owner', 'once', 'push', 'push:did:plc:owner/once~main@3abc', { i }),
          );
      const queued = await a.webhooks.deliveries(hook.id);
      assert.equal(queued.length, 1);
      assert.equal(queued[0]!.state, 'pending');
      assert.ok(await a.webhooks.remove('did:plc:owner', 'once', hook.id));
      assert.deepEqual(await a.webhooks.deliveries(hook.id), []);
    });

    it('gives each delivery to one claimer, again after a lease ran out, and fails it after three attempts', async () => {
      await a.webhooks.add('did:plc:owner', 'many', 'http://127.0.0.1:9/hook');
      for (let i = 0; i < 40; i++)
        await a.db
          .transaction()
          .execute((tx) => queueEvent(tx, 'did:plc:owner', 'many', 'push', `push:${i}`, { i }));
      // Two processes claim at once, in small bites, until nothing is left.
      const taken: string[][] = [[], []];
      await Promise.all(
        [a, b].map(async (idx, n) => {
          for (;;) {
            const got = await idx.webhooks.claim(3, 60_000);
            if (got.length === 0) return;
            taken[n]!.push(...got.map((d) => d.id));
          }
        }),
      );
      const all = [...taken[0]!, ...taken[1]!];
      assert.equal(all.length, 40);
      assert.equal(new Set(all).size, 40, 'no delivery was claimed twice');
      // Leased: nothing more to claim while the leases hold.
      assert.deepEqual(await b.webhooks.claim(10, 60_000), []);

      // A delivery claimed with a lease that has run out (its process died) is claimed again.
      const hook2 = await a.webhooks.add('did:plc:owner', 'dying', 'http://127.0.0.1:9/hook');
      await a.db.transaction().execute((tx) => queueEvent(tx, 'did:plc:owner', 'dying', 'push', 'k', {}));
      const [first] = await a.webhooks.claim(1, -1);
      assert.equal(first?.webhook_id, hook2.id);
      const [again] = await b.webhooks.claim(1, 60_000);
      assert.equal(again?.id, first.id);
      assert.equal(again.attempts, 2);
      // Its attempts run out: failed, each attempt in its log.
      await b.webhooks.finish(again, { ok: false, status: 500, error: 'the receiver answered 500' }, 0);
      const [third] = await a.webhooks.claim(1, 60_000);
      assert.equal(third?.attempts, MAX_ATTEMPTS);
      await a.webhooks.finish(third, { ok: false, status: 503, error: 'the receiver answered 503' }, 0);
      const [d] = await a.webhooks.deliveries(hook2.id);
      assert.equal(d?.state, 'failed');
      assert.deepEqual(d.log.map((x) => x.status).sort(), [500, 503]);
      assert.deepEqual(await a.webhooks.claim(10, 60_000), []);
      // Redelivered: pending again from its first attempt.
      assert.ok(await a.webhooks.redeliver(hook2.id, d.id));
      const [re] = await b.webhooks.claim(1, 60_000);
      assert.equal(re?.attempts, 1);
    });
  });
}
