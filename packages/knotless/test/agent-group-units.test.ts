// Which forwarded requests the agent's group commit may take (agent/group-state.ts parseWrite): only a
// ref write with a swap, under a bearer token whose subject is the account written. Everything else
// must be forwarded as it came, so that its own credentials and conditions reach the PDS untouched.
// And the chain of the group commit's own commits, against a PDS stand-in that enforces swapCommit.
import assert from 'node:assert/strict';
import { describe, it, mock } from 'node:test';
import { GroupCommit } from '../src/agent/group-commit.ts';
import { parseWrite } from '../src/agent/group-state.ts';
import type { Transport } from 'knotless-core/xrpc/transport';

const DID = 'did:plc:alice';
const PUT = new URL('http://pds.test/xrpc/com.atproto.repo.putRecord');
const DELETE = new URL('http://pds.test/xrpc/com.atproto.repo.deleteRecord');
const COLLECTION = 'dev.knotless.ref';

function bearer(claims: Record<string, unknown>): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `Bearer ${part({ alg: 'ES256K' })}.${part(claims)}.c2lnbmF0dXJl`;
}

const auth = { authorization: bearer({ sub: DID, exp: 2_000_000_000 }), 'content-type': 'application/json' };
const put = (extra: Record<string, unknown> = {}) =>
  Buffer.from(
    JSON.stringify({
      repo: DID,
      collection: COLLECTION,
      rkey: 'site:refs:heads:main',
      record: { ref: 'refs/heads/main' },
      swapRecord: 'bafyold',
      ...extra,
    }),
  );

describe('the writes a group commit takes', () => {
  it('takes a put or a delete with a swap under a bearer token of the account written', () => {
    const op = parseWrite(PUT, auth, put(), COLLECTION);
    assert.deepEqual(
      op && { kind: op.kind, did: op.did, rkey: op.rkey, swap: op.swap, expires: op.expires },
      { kind: 'put', did: DID, rkey: 'site:refs:heads:main', swap: 'bafyold', expires: 2_000_000_000 },
    );
    assert.equal(parseWrite(PUT, auth, put({ swapRecord: null }), COLLECTION)?.swap, null);
    const del = JSON.stringify({ repo: DID, collection: COLLECTION, rkey: 'k', swapRecord: 'bafyold' });
    assert.equal(parseWrite(DELETE, auth, Buffer.from(del), COLLECTION)?.kind, 'delete');
  });

  it('forwards as it came a write whose token is for another account, or is not a bearer token', () => {
    const other = { ...auth, authorization: bearer({ sub: 'did:plc:mallory', exp: 2_000_000_000 }) };
    assert.equal(parseWrite(PUT, other, put(), COLLECTION), undefined);
    assert.equal(parseWrite(PUT, { ...auth, dpop: 'proof' }, put(), COLLECTION), undefined);
    assert.equal(
      parseWrite(PUT, { ...auth, authorization: 'DPoP abc.def.ghi' }, put(), COLLECTION),
      undefined,
    );
    assert.equal(parseWrite(PUT, { 'content-type': 'application/json' }, put(), COLLECTION), undefined);
  });

  it("takes the listing's swapCommit with the write: the commit proves the listing", () => {
    assert.equal(
      parseWrite(PUT, auth, put({ swapCommit: 'bafycommit' }), COLLECTION)?.swapCommit,
      'bafycommit',
    );
    assert.equal(parseWrite(PUT, auth, put(), COLLECTION)?.swapCommit, undefined);
  });

  it('forwards as it came a write without a swap, with conditions of its own, or of another collection', () => {
    const noSwap = JSON.parse(put().toString()) as Record<string, unknown>;
    delete noSwap['swapRecord'];
    assert.equal(parseWrite(PUT, auth, Buffer.from(JSON.stringify(noSwap)), COLLECTION), undefined);
    assert.equal(parseWrite(PUT, auth, put({ swapCommit: 7 }), COLLECTION), undefined);
    assert.equal(parseWrite(PUT, auth, put({ validate: false }), COLLECTION), undefined);
    assert.equal(parseWrite(PUT, auth, put({ collection: 'dev.knotless.repo' }), COLLECTION), undefined);
    const del = JSON.stringify({ repo: DID, collection: COLLECTION, rkey: 'k', swapRecord: null });
    assert.equal(parseWrite(DELETE, auth, Buffer.from(del), COLLECTION), undefined);
    const create = new URL('http://pds.test/xrpc/com.atproto.repo.createRecord');
    assert.equal(parseWrite(create, auth, put(), COLLECTION), undefined);
    assert.equal(parseWrite(PUT, auth, Buffer.from('not json'), COLLECTION), undefined);
  });
});

/**
 * A PDS stand-in for one account, enough for the group commit: its latest commit, its ref records'
 * CIDs, and `applyWrites` / `putRecord` refused as the PDS refuses them when `swapCommit` is not the
 * latest commit. Counts the requests by method.
 */
function accountPds(rateHeaders: () => Record<string, string> = () => ({})): {
  transport: Transport;
  commit: () => string;
  calls: Map<string, number>;
  /** A commit by someone else (another machine writing the account directly). */
  foreign: () => void;
} {
  let n = 0;
  let commit = 'c0';
  const cids = new Map<string, string>();
  const calls = new Map<string, number>();
  const answer = (status: number, body: unknown) => ({
    status,
    headers: rateHeaders(),
    body: Buffer.from(JSON.stringify(body)),
  });
  const transport: Transport = {
    request(url, init) {
      const method = url.pathname.split('/').pop()!;
      calls.set(method, (calls.get(method) ?? 0) + 1);
      if (method === 'com.atproto.sync.getLatestCommit')
        return Promise.resolve(answer(200, { cid: commit, rev: `r${n}` }));
      if (method === 'com.atproto.repo.getRecord') {
        const cid = cids.get(url.searchParams.get('rkey')!);
        return Promise.resolve(cid ? answer(200, { cid }) : answer(400, { error: 'RecordNotFound' }));
      }
      const body = JSON.parse(Buffer.from(init.body as string | Buffer).toString('utf8')) as {
        swapCommit?: string;
        writes?: Array<{ rkey: string }>;
        rkey?: string;
      };
      if (body.swapCommit !== undefined && body.swapCommit !== commit)
        return Promise.resolve(answer(400, { error: 'InvalidSwap', message: 'commit was at another CID' }));
      n++;
      commit = `c${n}`;
      const rkeys = body.writes?.map((w) => w.rkey) ?? [body.rkey!];
      for (const k of rkeys) cids.set(k, `${k}-${n}`);
      const results = rkeys.map((k) => ({ uri: `at://${DID}/${COLLECTION}/${k}`, cid: `${k}-${n}` }));
      const head = { cid: commit, rev: `r${n}` };
      return Promise.resolve(
        answer(200, body.writes ? { commit: head, results } : { ...results[0], commit: head }),
      );
    },
    close() {},
  };
  const foreign = (): void => {
    n++;
    commit = `c${n}`;
  };
  return { transport, commit: () => commit, calls, foreign };
}

/** A group commit in front of a fresh {@link accountPds}; `log` gets the group commit's lines. */
function grouped(
  rateHeaders?: () => Record<string, string>,
  log: (line: string) => void = () => {},
): { pds: ReturnType<typeof accountPds>; group: GroupCommit } {
  const pds = accountPds(rateHeaders);
  return {
    pds,
    group: new GroupCommit(pds.transport, log, () => {}),
  };
}

describe("the group commit's chain of its own commits", () => {
  const write = (rkey: string, swapCommit?: string) =>
    Buffer.from(
      JSON.stringify({
        repo: DID,
        collection: COLLECTION,
        rkey,
        record: { ref: `refs/heads/${rkey}` },
        swapRecord: null,
        ...(swapCommit === undefined ? {} : { swapCommit }),
      }),
    );

  it('links each commit to the one it was swapped on, so an older listing is known to be proven', async () => {
    const { pds, group } = grouped();
    // Two writes in one commit, on the account's state read first (c0 → c1).
    const first = ['a', 'b'].map((k) => group.accept(PUT, auth, write(k))!);
    assert.deepEqual(
      (await Promise.all(first)).map((r) => r.status),
      [200, 200],
    );
    assert.equal(pds.commit(), 'c1');
    assert.ok(group.provenSince('c1', 'c0'), 'c1 came right after c0, and is ours');
    // Two more on a listing read at c0: our own commit since, so they land at once on c1.
    const second = ['c', 'd'].map((k) => group.accept(PUT, auth, write(k, 'c0'))!);
    assert.deepEqual(
      (await Promise.all(second)).map((r) => r.status),
      [200, 200],
    );
    assert.equal(pds.commit(), 'c2');
    assert.ok(group.provenSince('c2', 'c0'));
    assert.equal(pds.calls.get('com.atproto.repo.applyWrites'), 2, 'no commit refused and tried again');
  });

  it('chains a write sent alone that names no commit, and sends it as it came when the account moved', async () => {
    const { pds, group } = grouped();
    await Promise.all(['a', 'b'].map((k) => group.accept(PUT, auth, write(k))!));
    assert.equal(pds.commit(), 'c1');
    // One write, on a listing of its own (no commit named): tried on our latest, it lands chained.
    assert.equal((await group.accept(PUT, auth, write('e'))!).status, 200);
    assert.equal(pds.commit(), 'c2');
    assert.ok(group.provenSince('c2', 'c0'), 'a listing from before both commits is still proven');
    assert.equal(pds.calls.get('com.atproto.repo.putRecord'), 1);
    // Someone else writes the account: the next such write is refused on our latest, then sent as it
    // came, and lands; its commit is not taken for one of a chain of ours.
    pds.foreign();
    assert.equal((await group.accept(PUT, auth, write('f'))!).status, 200);
    assert.equal(pds.commit(), 'c4');
    assert.equal(pds.calls.get('com.atproto.repo.putRecord'), 3);
    assert.ok(!group.provenSince('c4', 'c2'));
  });
});

describe("the group commit's window and the account's write budget", () => {
  const write = (rkey: string) =>
    Buffer.from(
      JSON.stringify({
        repo: DID,
        collection: COLLECTION,
        rkey,
        record: { ref: `refs/heads/${rkey}` },
        swapRecord: null,
      }),
    );
  /** The headers the reference PDS sends with each write's answer: `remaining` of 5000 points this hour. */
  const budget = (remaining: number) => () => ({
    'ratelimit-limit': '5000',
    'ratelimit-remaining': String(remaining),
    'ratelimit-reset': String(Math.floor(Date.now() / 1000) + 3600),
    'ratelimit-policy': '5000;w=3600',
  });

  /**
   * One write, then, 100 ms later by the group commit's clock (the timers are mocked: what is tested
   * is which writes share a commit, not how fast), a second: the requests the two cost.
   */
  async function twoWrites(remaining: number): Promise<{ calls: Map<string, number>; lines: string[] }> {
    const lines: string[] = [];
    const { pds, group } = grouped(budget(remaining), (line) => lines.push(line));
    // A first write tells the budget (real timers: nothing is known of it yet, the window is short).
    assert.equal((await group.accept(PUT, auth, write('seed'))!).status, 200);
    pds.calls.clear();
    // The seed's commit ends its turn after answering it: once the microtasks ran, the account is idle.
    await new Promise((resolve) => setImmediate(resolve));
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      const first = group.accept(PUT, auth, write('a'))!;
      mock.timers.tick(100);
      const second = group.accept(PUT, auth, write('b'))!;
      mock.timers.tick(1000);
      assert.deepEqual(
        (await Promise.all([first, second])).map((r) => r.status),
        [200, 200],
      );
    } finally {
      mock.timers.reset();
    }
    return { calls: pds.calls, lines };
  }

  it('sends writes 100 ms apart as two requests while the budget is ample', async () => {
    const { calls, lines } = await twoWrites(4000);
    assert.equal(calls.get('com.atproto.repo.putRecord'), 2);
    assert.equal(calls.get('com.atproto.repo.applyWrites'), undefined);
    assert.deepEqual(
      lines.filter((l) => l.includes('write points')),
      [],
    );
  });

  it('folds them into one commit once the budget runs low, and says so in its log once', async () => {
    const { calls, lines } = await twoWrites(300);
    assert.equal(calls.get('com.atproto.repo.putRecord'), undefined);
    assert.equal(calls.get('com.atproto.repo.applyWrites'), 1);
    const said = lines.filter((l) => l.includes('write points'));
    assert.equal(said.length, 1, lines.join('\n'));
    assert.match(
      said[0]!,
      /^group commit: did:plc:alice has 300 of 5000 write points left until \S+; waiting 250 ms for more pushes per commit$/,
    );
  });
});
