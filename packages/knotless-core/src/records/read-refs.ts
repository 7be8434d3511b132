// The one reader of a repository's refs (format.md, "The ref table"): the owner's `dev.knotless.refs`
// table, fetched with its proof and its parts checked against the CIDs the verified table names; when
// the proof shows no table, the repository's `dev.knotless.ref` records as they have always been read.
// Every command that shows or fetches a repository's refs reads them here, so that no reader trusts
// an unproved listing where a proved one exists.
import { KnotlessError, isKnotlessError } from '../errors.ts';
import { safeText } from '../text/terminal.ts';
import { REFS_COLLECTION, REFS_PART_COLLECTION, REPO_COLLECTION } from './collections.ts';
import {
  joinRefTable,
  parseRefTable,
  refTableKey,
  type FetchedPart,
  type RefTable,
  type StoredTable,
} from './ref-table.ts';
import type { RemoteRef } from './remote-ref.ts';
import type { RemoteRepo, TableVerifier } from './remote-repo.ts';
import { isSealed } from './sealer.ts';
import { NewestRev } from './newest-rev.ts';
import { previousSigningKey, type PreviousKey } from '../identity/plc-log.ts';
import { accountKey, answeredNoProof, verifiedRead, type VerifiedRecord } from './verified-read.ts';

/** Parts fetched at once: a large table's parts are many small reads, bounded so a PDS is not flooded. */
const PART_READS = 8;
/** Ignored old records named in the warning; the rest are counted. */
const NAMED = 5;

/** The refs of a repository as its owner's table holds them, with the commit the table was proved at. */
export interface TableRead {
  table: RefTable;
  /** The table record as stored (its own entries, parts and `gone`): a writer lays its next one out from it. */
  stored: StoredTable;
  /** The table record's CID (every ref read from it carries it). */
  cid: string;
  rev: string;
  commit: string;
  /** The `#atproto` key the proof was checked against; undefined when verification is off. */
  signingKey: string | undefined;
  /**
   * The records as read (the table's JSON form and its parts'), when this read fetched them: what the
   * warm agent hands its helpers, who parse them as any reader does ({@link parseTableRead}).
   */
  raw?: { value: unknown; parts: FetchedPart[] };
}

/**
 * The owner's table of the repository, verified, with its parts joined; undefined when the proof
 * shows there is none. A table that fails a rule is refused whole (corrupt-remote, exit 12), a proof
 * that does not hold too (unverified-remote, exit 21).
 */
export async function readRefTable(remote: RemoteRepo): Promise<TableRead | undefined> {
  const verify: TableVerifier | undefined = remote.verifier;
  if (verify === undefined) throw new Error(`${remote.label} was opened without a verifier`);
  const name = `${remote.owner.handle ?? remote.owner.did}/${remote.name}`;
  if (verify.unchecked !== undefined) return readUnchecked(remote, verify, name);
  const reads = await openVerifiedReads(remote, verify);
  const table = await readTableWith(remote, reads.read);
  reads.save();
  return table === undefined ? undefined : { ...table, signingKey: reads.signingKey };
}

/** Verified reads of one account's records, for one command: see {@link openVerifiedReads}. */
export interface VerifiedReads {
  /** The `#atproto` key proofs are checked against. */
  signingKey: string;
  /** The PDS the reads go to (KNOTLESS_SERVICE when set, else the one the DID document names). */
  pds: string;
  /** One record with its proof, checked, and its commit no older than the newest verified. */
  read: (collection: string, rkey: string) => Promise<VerifiedRecord>;
  /** Keeps the newest commit the reads verified (records/newest-rev.ts). */
  save: () => void;
}

/**
 * Reads the account's DID document for its key (the one the owner's resolution read, when it read
 * one) and returns verified reads of its records against it: each proof checked (records/
 * verified-read.ts), taken from the key the current one replaced only for a commit made before the
 * replacement, and refused when older than the newest commit this machine verified of the account.
 */
export async function openVerifiedReads(remote: RemoteRepo, verify: TableVerifier): Promise<VerifiedReads> {
  const did = remote.owner.did;
  const name = `${remote.owner.handle ?? did}/${remote.name}`;
  const account = await accountKey(verify.transport, did, verify.plcUrl, name, verify.document?.());
  const signingKey = account.key;
  // No going back: every proof of this read is at least as new as the newest this machine verified.
  const newest = new NewestRev(
    verify.revs,
    did,
    { pds: account.pds ?? remote.owner.pds, key: signingKey },
    name,
  );
  // Read once, and only when a proof is not signed by the current key (an account that just moved).
  let previous: Promise<PreviousKey | undefined> | undefined;
  const previousKey = did.startsWith('did:plc:')
    ? () =>
        (previous ??= previousSigningKey(
          verify.transport,
          verify.plcUrl,
          did,
          signingKey,
          AbortSignal.timeout(10_000),
        ))
    : undefined;
  const pds = verify.service(account.pds);
  return {
    signingKey,
    pds,
    read: async (collection, rkey) => {
      const got = await verifiedRead({
        ...(previousKey === undefined ? {} : { previousKey }),
        transport: verify.transport,
        pds,
        did,
        collection,
        rkey,
        signingKey,
        name,
      });
      newest.check(got.rev);
      return got;
    },
    save: () => newest.save(),
  };
}

/**
 * The table as {@link readRefTable} reads it with verification turned off (KNOTLESS_VERIFY=0): from
 * the PDS, whichever commit the answers carry and whoever signed it, without reading the DID
 * document for a key, and without keeping the newest commit (nothing unchecked may refuse a checked
 * proof later). Said on stderr by the verifier's `unchecked`.
 */
async function readUnchecked(
  remote: RemoteRepo,
  verify: TableVerifier,
  name: string,
): Promise<TableRead | undefined> {
  verify.unchecked?.();
  const table = await readTableWith(remote, (collection, rkey) =>
    verifiedRead({
      transport: verify.transport,
      pds: verify.service(undefined),
      did: remote.owner.did,
      collection,
      rkey,
      signingKey: undefined,
      name,
    }),
  );
  return table === undefined ? undefined : { ...table, signingKey: undefined };
}

/** The table and its parts, each record read by `read`; undefined when the table is proved absent. */
export async function readTableWith(
  remote: RemoteRepo,
  read: (collection: string, rkey: string) => Promise<VerifiedRecord>,
): Promise<Omit<TableRead, 'signingKey'> | undefined> {
  const did = remote.owner.did;
  const key = refTableKey(remote.name, did, did);
  const got = await read(REFS_COLLECTION, key);
  if (!got.found) return undefined;
  const stored = parseStoredTable(did, remote.name, remote.label, got.value);
  const parts: FetchedPart[] = [];
  const queue = [...stored.parts];
  await Promise.all(
    Array.from({ length: Math.min(PART_READS, queue.length) }, async () => {
      for (let link = queue.shift(); link !== undefined; link = queue.shift()) {
        const part = await read(REFS_PART_COLLECTION, link.rkey);
        // A part the proof shows absent is left out: joining names it missing.
        if (part.found) parts.push({ rkey: link.rkey, cid: part.cid, value: part.value });
      }
    }),
  );
  await remote.prepare('plain');
  return parseTableRead(did, remote.name, remote.label, got, parts, stored);
}

/**
 * The owner's table record of repository `name` of `did`, checked as every reader checks it
 * (ref-table.ts); `label` names the repository in the sentence that refuses it.
 */
export function parseStoredTable(did: string, name: string, label: string, value: unknown): StoredTable {
  if (isSealed(value))
    throw new KnotlessError(
      'corrupt-remote',
      `The ref table of ${label} is sealed (a private repository's), which this version of knotless cannot read; upgrade knotless and try again.`,
    );
  return parseRefTable(value, `at://${did}/${REPO_COLLECTION}/${name}`, true);
}

/**
 * A table read from its records: the table's JSON form (its CID, and the commit it was read or
 * delivered at) and its parts, each checked against the CID the table names. One rule for a cold
 * read, the warm agent's view (from its checked event stream) and the helper the agent hands it to.
 */
export function parseTableRead(
  did: string,
  name: string,
  label: string,
  got: { value: unknown; cid: string; rev: string; commit: string },
  parts: FetchedPart[],
  stored = parseStoredTable(did, name, label, got.value),
): Omit<TableRead, 'signingKey'> {
  const table = joinRefTable(stored, parts);
  return {
    table,
    stored,
    cid: got.cid,
    rev: got.rev,
    commit: got.commit,
    raw: { value: got.value, parts },
  };
}

/** A verified table's refs (HEAD first, as the owner's `head`) in the form ref records are read in. */
export function tableRefs(remote: RemoteRepo, read: TableRead): RemoteRef[] {
  const { table, cid, rev } = read;
  const key = refTableKey(remote.name, remote.owner.did, remote.owner.did);
  const out: RemoteRef[] = [];
  const at = { repo: remote.name, updatedAt: table.updatedAt };
  if (table.head !== undefined)
    out.push({ key: `${key}#HEAD`, cid, rev, record: { ...at, ref: 'HEAD', symref: table.head, packs: [] } });
  for (const r of table.refs) {
    if (r.target === undefined) continue;
    const record = { ...at, ref: r.ref, target: r.target, packs: r.packs };
    out.push({
      key: `${key}#${r.ref}`,
      cid,
      rev,
      record: r.peeled === undefined ? record : { ...record, peeled: r.peeled },
    });
  }
  return out;
}

/** The table each remote's last {@link readRepoRefs} read, which a push writes its next one over. */
const tableReads = new WeakMap<RemoteRepo, TableRead>();

/**
 * Takes `read` as the table `remote`'s refs are in, as if {@link readRepoRefs} had just read it: the
 * warm agent's view, which a push's write proves by its `swapRecord` on the table's CID.
 */
export function useTableRead(remote: RemoteRepo, read: TableRead): void {
  remote.layout = 'table';
  tableReads.set(remote, read);
}

/** The ref table the last {@link readRepoRefs} of `remote` read, when its refs are in one. */
export function lastTableRead(remote: RemoteRepo): TableRead | undefined {
  return remote.layout === 'table' ? tableReads.get(remote) : undefined;
}

/**
 * Every ref of a repository, HEAD included, as readers use them: from the owner's verified table when
 * there is one (the repository's `dev.knotless.ref` records are then ignored, with one warning naming
 * them and the commits they point at), else from those records exactly as before. The listing of the
 * records runs beside the table's read, so a repository without a table waits no longer for it.
 * Sets {@link RemoteRepo.layout}. A context that does not verify (no {@link RemoteRepo.verifier})
 * reads the records alone.
 */
export async function readRepoRefs(remote: RemoteRepo): Promise<RemoteRef[]> {
  const verify = remote.verifier;
  if (verify === undefined) {
    const refs = await remote.listRefs();
    remote.layout = 'records';
    return refs;
  }
  const listing = remote.listRefs().then(
    (refs) => ({ refs }),
    (err: unknown) => ({ err }),
  );
  let table: TableRead | undefined;
  try {
    table = await readRefTable(remote);
  } catch (err) {
    // When the PDS failed both reads, the listing's sentence (today's, for a PDS down, an account
    // gone, a rate limit, a repository that does not exist) says it; a proof that does not hold is
    // said as such, always.
    const listed = await listing;
    if (
      'err' in listed &&
      isKnotlessError(listed.err) &&
      (!isKnotlessError(err, 'unverified-remote') || answeredNoProof(err))
    )
      throw listed.err;
    throw err;
  }
  const old = await listing;
  if (table === undefined) {
    if ('err' in old) throw old.err;
    remote.layout = 'records';
    return old.refs;
  }
  remote.layout = 'table';
  tableReads.set(remote, table);
  if ('err' in old) {
    if (!isKnotlessError(old.err)) throw old.err;
    remote.warn(
      `the older dev.knotless.ref records of ${remote.label} could not be listed (${old.err.message.replace(/\.$/, '')}); they are ignored, as its ref table holds its refs`,
    );
  } else if (old.refs.length > 0) {
    const named = old.refs
      .slice(0, NAMED)
      .map(
        (r) =>
          `${safeText(r.record.ref)} at ${safeText((r.record.target ?? r.record.symref ?? '').slice(0, 12))}`,
      );
    const more = old.refs.length > NAMED ? `, and ${old.refs.length - NAMED} more` : '';
    remote.warn(
      `${remote.label} keeps its refs in a ref table, so its ${old.refs.length} older dev.knotless.ref record(s) are ignored (${named.join(', ')}${more}): a machine on an older version of knotless wrote them, and its pushes are not seen until it is upgraded`,
    );
  }
  return tableRefs(remote, table);
}
