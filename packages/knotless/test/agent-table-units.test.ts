// The agent's fold of ref table writes (agent/table-group.ts) against a PDS stand-in that keeps one
// table record and enforces `swapRecord` on it as the PDS does. The case the whole-suite runs met: a
// push whose helper read the table again after another machine's write (a compaction) while the
// agent's view of it was being taken afresh; the agent must build on that newer table, never on an
// older one of its own, which the PDS refuses to every attempt until the push gives up.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TableGroup, type TableViews } from '../src/agent/table-group.ts';
import type { WireTable } from '../src/agent/views.ts';
import { applyRefUpdates, layoutRefTable, type RefTable } from 'knotless-core/records/ref-table';
import { recordCid } from 'knotless-core/records/proof';
import { RateBudgets } from 'knotless-core/xrpc/rate-limit';
import type { Transport } from 'knotless-core/xrpc/transport';

const DID = 'did:plc:aliceaaaaaaaaaaaaaaaaaaa';
const RKEY = 'site';
const PUT = new URL('http://pds.test/xrpc/com.atproto.repo.putRecord');
const REPO = `at://${DID}/dev.knotless.repo/${RKEY}`;

function bearer(): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `Bearer ${part({ alg: 'ES256K' })}.${part({ sub: DID, exp: 2_000_000_000 })}.c2lnbmF0dXJl`;
}
const HEADERS = { authorization: bearer(), 'content-type': 'application/json' };

const pack = (n: number) => ({
  id: n.toString(16).padStart(40, '0'),
  size: 40,
  count: 1,
  inline: new Uint8Array(40).fill(n),
});
const oid = (n: number) => n.toString(16).padStart(40, 'a');

/** A table with `refs` (name → target number, each in its own pack), as a push writes it. */
async function tableWith(
  base: RefTable | undefined,
  refs: Record<string, number>,
): Promise<{
  table: RefTable;
  value: Record<string, unknown>;
  cid: string;
}> {
  const updates = Object.entries(refs).map(([ref, n]) => ({ ref, target: oid(n), packs: [pack(n)] }));
  const table = applyRefUpdates(base, updates, { repo: REPO, maintainer: false }, new Date());
  const writes = await layoutRefTable(table, RKEY, (v) => Promise.resolve(recordCid(v)));
  return { table, value: writes.table, cid: recordCid(writes.table) };
}

/**
 * One account's table record: `putRecord` lands only on the CID it holds (else InvalidSwap naming
 * it, as the PDS answers); `refuseNext` makes the next write fail as a missing blob does.
 */
function tablePds() {
  let cid: string | undefined;
  let rev = 0;
  let value: unknown;
  let refuse = false;
  const writes: Array<{ swap: unknown; status: number }> = [];
  const answer = (status: number, body: unknown) => ({
    status,
    headers: {},
    body: Buffer.from(JSON.stringify(body)),
  });
  const transport: Transport = {
    request(_url, init) {
      return Promise.resolve(answerTo(init));
    },
    close() {},
  };
  function answerTo(init: { body?: unknown }) {
    const body = JSON.parse(Buffer.from(init.body as string | Buffer).toString('utf8')) as {
      record: Record<string, unknown>;
      swapRecord?: string | null;
    };
    const refused = (status: number, res: unknown) => {
      writes.push({ swap: body.swapRecord, status });
      return answer(status, res);
    };
    if (refuse) {
      refuse = false;
      return refused(400, { error: 'BlobNotFound', message: 'Could not find blob: bafkrei' });
    }
    if ((body.swapRecord ?? undefined) !== cid)
      return refused(400, { error: 'InvalidSwap', message: `Record was at ${cid ?? 'null'}` });
    cid = recordCid(body.record);
    value = body.record;
    rev++;
    writes.push({ swap: body.swapRecord, status: 200 });
    return answer(200, {
      uri: `at://${DID}/dev.knotless.refs/${RKEY}`,
      cid,
      commit: { cid: `bafycommit${rev}`, rev: revOf(rev) },
    });
  }
  return {
    transport,
    writes,
    /** Another machine's write, straight to the PDS. */
    foreign: (record: Record<string, unknown>) => {
      cid = recordCid(record);
      value = record;
      rev++;
    },
    now: (): WireTable => ({ cid: cid!, rev: revOf(rev), commit: `bafycommit${rev}`, value, parts: [] }),
    refuseNext: () => {
      refuse = true;
    },
  };
}

/** Revisions that sort as TIDs do. */
const revOf = (n: number) => `3l${n.toString().padStart(11, '0')}`;

function put(record: Record<string, unknown>, swapRecord: string) {
  return Buffer.from(
    JSON.stringify({
      repo: DID,
      collection: 'dev.knotless.refs',
      rkey: RKEY,
      record,
      swapRecord,
      validate: false,
    }),
  );
}

describe("the agent's fold of ref table writes", () => {
  it("builds a push on the newer table its helper read, not on the agent's own older write", async () => {
    const pds = tablePds();
    let view: WireTable | undefined;
    const views: TableViews = {
      tableOf: () => view,
      tableLanded: () => Promise.resolve(),
    };
    const group = new TableGroup(pds.transport, () => {}, views, new RateBudgets());
    const a = await tableWith(undefined, { 'refs/heads/main': 1 });
    pds.foreign(a.value);
    view = pds.now();
    // This machine's push lands B: the agent's latest write.
    const b = await tableWith(a.table, { 'refs/heads/main': 2 });
    const first = await group.accept(PUT, HEADERS, put(b.value, a.cid));
    assert.equal(first?.status, 200);
    // Another machine writes C; the view takes it, and a push decided on C fails for
    // its own reason (a pack gone), so the agent's latest write is still B.
    const c = await tableWith(b.table, { 'refs/heads/side': 7 });
    pds.foreign(c.value);
    view = pds.now();
    const cCid = view.cid;
    pds.refuseNext();
    const d = await tableWith(c.table, { 'refs/heads/topic': 3 });
    assert.equal((await group.accept(PUT, HEADERS, put(d.value, cCid)))?.status, 400);
    // The view is dropped (its stream re-listing), and the push, decided again on C, comes back.
    view = undefined;
    const again = await group.accept(PUT, HEADERS, put(d.value, cCid));
    assert.equal(again?.status, 200, Buffer.from(again!.body).toString());
    assert.deepEqual(pds.writes.at(-1), { swap: cCid, status: 200 });
  });
});
