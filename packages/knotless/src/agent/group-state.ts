import { mapLimit } from 'knotless-core/packs/transfer';
import type { HttpResponse, Transport } from 'knotless-core/xrpc/transport';

/** One ref write a helper sent (`putRecord` or `deleteRecord`), as the group commit needs it. */
export interface RefOp {
  kind: 'put' | 'delete';
  did: string;
  collection: string;
  rkey: string;
  /** The record a put writes. */
  record: unknown;
  /** The CID the record must have now; null: it must not exist. */
  swap: string | null;
  /** The account's commit the helper's listing was read at, when it asks for that to be proven. */
  swapCommit?: string;
  /** The helper's `authorization` header, and when its token expires (seconds since the epoch). */
  authorization: string;
  expires: number;
}

const WRITE = /\/xrpc\/com\.atproto\.repo\.(putRecord|deleteRecord)$/;
const BEARER = /^Bearer ([\w-]+)\.([\w-]+)\.([\w-]+)$/;

/**
 * The write a forwarded request makes, when the group commit can take it: a `putRecord` or
 * `deleteRecord` of `collection` with a `swapRecord` and nothing else (but `extra`, fields the caller
 * carries over itself), authorized by a bearer token whose subject is the account written. Anything else (an OAuth request, whose DPoP proof signs its
 * own URL; a write without a swap; options the commit could not carry) is forwarded as it came.
 */
export function parseWrite(
  url: URL,
  headers: Record<string, string>,
  body: Buffer,
  collection: string,
  extra: readonly string[] = [],
): RefOp | undefined {
  const kind = WRITE.exec(url.pathname)?.[1];
  const auth = headers['authorization'];
  if (kind === undefined || auth === undefined || headers['dpop'] !== undefined) return undefined;
  const token = BEARER.exec(auth);
  if (token === null) return undefined;
  const claims = jsonOf(Buffer.from(token[2]!, 'base64url')) as { sub?: unknown; exp?: unknown } | undefined;
  const input = jsonOf(body) as Record<string, unknown> | undefined;
  if (claims === undefined || input === undefined || typeof input !== 'object' || input === null)
    return undefined;
  const allowed = kind === 'putRecord' ? PUT_KEYS : DELETE_KEYS;
  if (!Object.keys(input).every((k) => allowed.has(k) || extra.includes(k))) return undefined;
  const { repo, rkey, swapRecord, record, swapCommit } = input;
  if (swapCommit !== undefined && typeof swapCommit !== 'string') return undefined;
  // The token names the account: a write is grouped only under credentials for the account it writes.
  if (typeof repo !== 'string' || !repo.startsWith('did:') || claims.sub !== repo) return undefined;
  if (input['collection'] !== collection || typeof rkey !== 'string') return undefined;
  if (!('swapRecord' in input) || (swapRecord !== null && typeof swapRecord !== 'string')) return undefined;
  if (kind === 'putRecord' && (typeof record !== 'object' || record === null)) return undefined;
  if (kind === 'deleteRecord' && swapRecord === null) return undefined;
  return {
    kind: kind === 'putRecord' ? 'put' : 'delete',
    did: repo,
    collection,
    rkey,
    record,
    swap: swapRecord,
    ...(swapCommit === undefined ? {} : { swapCommit }),
    authorization: auth,
    expires: typeof claims.exp === 'number' ? claims.exp : 0,
  };
}

/**
 * What a write sent alone did, from the PDS's 200 answer to it: the commit (CID and revision) and the
 * record's new CID (null: deleted); undefined when the answer does not say.
 */
export function landedAlone(
  op: Pick<RefOp, 'kind'>,
  body: Buffer,
): { commit: string; rev: string; cid: string | null } | undefined {
  const res = jsonOf(body) as { cid?: unknown; commit?: { cid?: unknown; rev?: unknown } } | undefined;
  const commit = res?.commit;
  if (typeof commit?.cid !== 'string' || typeof commit.rev !== 'string') return undefined;
  if (op.kind === 'delete') return { commit: commit.cid, rev: commit.rev, cid: null };
  return typeof res?.cid === 'string' ? { commit: commit.cid, rev: commit.rev, cid: res.cid } : undefined;
}

const PUT_KEYS = new Set(['repo', 'collection', 'rkey', 'record', 'swapRecord', 'swapCommit']);
const DELETE_KEYS = new Set(['repo', 'collection', 'rkey', 'swapRecord', 'swapCommit']);

function jsonOf(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    // Not JSON: not a write this can group.
    if (err instanceof SyntaxError) return undefined;
    throw err;
  }
}

/** The answer the PDS gives a write whose swap failed (BadRecordSwapError), for one write alone. */
export function swapAnswer(now: string | null): HttpResponse {
  return json(400, { error: 'InvalidSwap', message: `Record was at ${now ?? 'null'}` });
}

function json(status: number, body: unknown): HttpResponse {
  return {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8' },
    body: Buffer.from(JSON.stringify(body)),
  };
}

/** The records the group commit has touched, as they are at one commit of the account. */
interface Known {
  commit: string;
  /** The revision of `commit`. */
  rev: string;
  /** Record key → CID at `commit` (null: no such record). */
  cids: Map<string, string | null>;
}

/**
 * What the agent knows of one account: a commit, and the CIDs its records have at that commit.
 * Sound because every group commit carries `swapCommit`: the commit is read before any record, so a
 * record read later holds its value at that commit unless the account moved, and then the commit is
 * refused and everything is read again. After a commit of ours lands, the new commit's records are
 * the old ones with our writes (swapCommit makes it the very next commit). A write sent alone, or
 * anything unclear, forgets it all.
 */
export class AccountState {
  readonly did: string;
  readonly #transport: Transport;
  readonly #xrpc: string;
  readonly #collection: string;
  #known: Known | undefined;
  /**
   * Our own commits, one after another with nothing between (each swapped on the one before): the
   * revision they started from and the latest. While the account is at `to`, whoever has seen the
   * account up to `from` and applied our writes has seen all of it.
   */
  #chain: { from: string; to: string } | undefined;

  /** `xrpcBase`: the PDS's XRPC root as the helpers address it (`https://pds/xrpc`). */
  constructor(transport: Transport, xrpcBase: string, did: string, collection: string) {
    this.#transport = transport;
    this.#xrpc = xrpcBase;
    this.did = did;
    this.#collection = collection;
  }

  /** The URL of a method at this account's PDS. */
  url(nsid: string): URL {
    return new URL(`${this.#xrpc}/${nsid}`);
  }

  /** The commit this state is at, when known. */
  get commit(): string | undefined {
    return this.#known?.commit;
  }

  knows(rkey: string): boolean {
    return this.#known?.cids.has(rkey) ?? false;
  }

  forget(): void {
    this.#known = undefined;
    this.#chain = undefined;
  }

  /** When `rev` is the latest of our own unbroken commits, the revision they started from. */
  ownSince(rev: string): string | undefined {
    return this.#chain?.to === rev ? this.#chain.from : undefined;
  }

  /** The commit to swap against and the CIDs of these records at it (read when not known). */
  async current(rkeys: string[]): Promise<Known> {
    const known = this.#known ?? { ...(await this.#latestCommit()), cids: new Map() };
    const missing = rkeys.filter((k) => !known.cids.has(k));
    // 32 at once: a commit of a swarm's first pushes has a hundred records to read, and each
    // round of reads is a round trip the whole batch waits for.
    const read = await mapLimit(missing, 32, (k) => this.#recordCid(k));
    missing.forEach((k, i) => known.cids.set(k, read[i]!));
    this.#known = known;
    return known;
  }

  /**
   * The known state with these records' CIDs filled in where it has none, from a listing complete at
   * the state's own commit (the caller checks that it is).
   */
  fill(listed: Array<[string, string | null]>): Known {
    const known = this.#known!;
    for (const [k, cid] of listed) if (!known.cids.has(k)) known.cids.set(k, cid);
    return known;
  }

  /** An applyWrites entry for `op`, given what its record is now. */
  writeOf(op: RefOp, now: string | null): Record<string, unknown> {
    const base = { collection: op.collection, rkey: op.rkey };
    if (op.kind === 'delete') return { $type: 'com.atproto.repo.applyWrites#delete', ...base };
    const action = now === null ? 'create' : 'update';
    return { $type: `com.atproto.repo.applyWrites#${action}`, ...base, value: op.record };
  }

  /**
   * Takes a landed commit's answer: records the new state, and returns for each write the answer its
   * own putRecord or deleteRecord would have had, and the record's new CID (null: deleted), with the
   * commit's CID and revision; undefined when the answer does not say enough.
   */
  landed(
    swapCommit: string,
    ops: RefOp[],
    body: Buffer,
  ): { answers: HttpResponse[]; cids: Array<string | null>; commit: string; rev: string } | undefined {
    const res = jsonOf(body) as
      | {
          commit?: { cid?: unknown; rev?: unknown };
          results?: Array<{ cid?: unknown; uri?: unknown; validationStatus?: unknown }>;
        }
      | undefined;
    const commit = res?.commit;
    const results = res?.results;
    if (typeof commit?.cid !== 'string' || typeof commit.rev !== 'string') return undefined;
    if (!Array.isArray(results) || results.length !== ops.length) return undefined;
    const answers: HttpResponse[] = [];
    for (const [i, op] of ops.entries()) {
      const r = results[i]!;
      if (op.kind === 'delete') {
        answers.push(json(200, { commit: { cid: commit.cid, rev: commit.rev } }));
        continue;
      }
      if (typeof r.cid !== 'string' || typeof r.uri !== 'string') return undefined;
      answers.push(
        json(200, {
          uri: r.uri,
          cid: r.cid,
          commit: { cid: commit.cid, rev: commit.rev },
          ...(typeof r.validationStatus === 'string' ? { validationStatus: r.validationStatus } : {}),
        }),
      );
    }
    const cids = ops.map((op, i) => (op.kind === 'delete' ? null : (results[i]!.cid as string)));
    const known = this.#known;
    if (known === undefined || known.commit !== swapCommit) this.forget();
    else {
      const before = known.rev;
      known.commit = commit.cid;
      known.rev = commit.rev;
      ops.forEach((op, i) => known.cids.set(op.rkey, cids[i]!));
      const from = this.#chain?.to === before ? this.#chain.from : before;
      this.#chain = { from, to: commit.rev };
    }
    return { answers, cids, commit: commit.cid, rev: commit.rev };
  }

  async #get(nsid: string, params: Record<string, string>): Promise<HttpResponse> {
    const url = this.url(nsid);
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
    return this.#transport.request(url, { method: 'GET', headers: {}, body: null });
  }

  async #latestCommit(): Promise<{ commit: string; rev: string }> {
    const res = await this.#get('com.atproto.sync.getLatestCommit', { did: this.did });
    const body =
      res.status === 200 ? (jsonOf(res.body) as { cid?: unknown; rev?: unknown } | undefined) : undefined;
    if (typeof body?.cid !== 'string' || typeof body.rev !== 'string')
      throw new Error(`getLatestCommit answered ${res.status}`);
    return { commit: body.cid, rev: body.rev };
  }

  async #recordCid(rkey: string): Promise<string | null> {
    const res = await this.#get('com.atproto.repo.getRecord', {
      repo: this.did,
      collection: this.#collection,
      rkey,
    });
    const body = jsonOf(res.body) as { cid?: unknown; error?: unknown } | undefined;
    if (res.status === 200 && typeof body?.cid === 'string') return body.cid;
    if (res.status === 400 && body?.error === 'RecordNotFound') return null;
    throw new Error(`getRecord answered ${res.status}`);
  }
}
