// The one reader of a repository's refs (format.md, "The ref table"): the owner's `dev.knotless.refs`
// table, fetched with its proof and its parts checked against the CIDs the verified table names; when
// the proof shows no table, the repository's `dev.knotless.ref` records as they have always been read.
// Every command that shows or fetches a repository's refs reads them here, so that no reader trusts
// an unproved listing where a proved one exists.
import { KnotlessError, isKnotlessError } from '../errors.ts';
import { safeText } from '../text/terminal.ts';
import { REFS_COLLECTION, REFS_PART_COLLECTION, REPO_COLLECTION } from './collections.ts';
import {
  compareRefNames,
  joinRefTable,
  maintainersOf,
  parseRefTable,
  refTableKey,
  type FetchedPart,
  type RefTable,
  type StoredTable,
} from './ref-table.ts';
import type { RemoteRef } from './remote-ref.ts';
import { isSafeRefName } from './ref-rules.ts';
import { teamRefs, type TeamRef, type TeamTable } from './team-refs.ts';
import type { RemoteRepo, TableVerifier } from './remote-repo.ts';
import { isSealed, newestEpoch, type RefSealer } from './sealer.ts';
import { NewestRev } from './newest-rev.ts';
import type { ListedRecord } from './list-records.ts';
import { proveListing, type ProofReads } from './proved-listing.ts';
import { previousSigningKey, type PreviousKey } from '../identity/plc-log.ts';
import {
  accountKey,
  answeredNoProof,
  readBlocks,
  verifiedRead,
  type ProofTree,
  type VerifiedRecord,
} from './verified-read.ts';
import type { XrpcClient } from '../xrpc/client.ts';

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
export interface VerifiedReads extends ProofReads {
  /** The `#atproto` key proofs are checked against. */
  signingKey: string;
  /** The PDS the reads go to (KNOTLESS_SERVICE when set, else the one the DID document names). */
  pds: string;
  /** Keeps the newest commit the reads verified (records/newest-rev.ts). */
  save: () => void;
}

/** The verifier's client of `pds` for a verified read, when it has one. */
function clientOf(verify: TableVerifier, pds: string): { client?: XrpcClient } {
  return verify.client === undefined ? {} : { client: verify.client(pds) };
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
    read: async (collection, rkey, keep, optional) => {
      const got = await verifiedRead({
        ...(optional === true ? { optional } : {}),
        ...(previousKey === undefined ? {} : { previousKey }),
        ...clientOf(verify, pds),
        ...(keep === undefined ? {} : { keep }),
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
    blocks: (cids, maxBytes, tooLarge) =>
      readBlocks(
        { ...clientOf(verify, pds), transport: verify.transport, pds, did, name },
        cids,
        maxBytes,
        tooLarge,
      ),
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
      ...clientOf(verify, verify.service(undefined)),
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
  return readTableAt(remote.label, read, refTableKey(remote.name, did, did), {
    repo: `at://${did}/${REPO_COLLECTION}/${remote.name}`,
    owner: true,
    holder: remote,
  });
}

/**
 * The sealer a table read in `holder`'s account opens with: the repository's privacy settled from
 * what was read (a sealed table names the key epoch it needs). A private repository's table is
 * sealed and a public one's is not; either the other way round is refused, as is a sealed table this
 * machine holds no key for (the opener's sentence).
 */
async function tableSealer(
  holder: RemoteRepo,
  label: string,
  value: unknown,
): Promise<RefSealer | undefined> {
  const sealed = isSealed(value);
  const epoch = sealed ? newestEpoch([value]) : 0;
  await holder.prepare(sealed ? 'sealed' : 'plain', epoch);
  if (sealed && holder.sealer !== undefined && !holder.sealer.knows(epoch)) await holder.reopen(epoch);
  const sealer = holder.sealer;
  if (sealed && sealer === undefined)
    throw new KnotlessError(
      'corrupt-remote',
      `The ref table of ${label} is sealed, and the repository is not private; nothing was read from it.`,
    );
  if (!sealed && sealer !== undefined)
    throw new KnotlessError(
      'corrupt-remote',
      `The ref table of ${label} is not sealed, and the repository is private (its refs would be in the clear); nothing was read from it.`,
    );
  return sealer;
}

/**
 * One writer's table of a repository (`key` in the account `read` reads, `holder`'s), its parts
 * joined: the owner's (`owner`), or a maintainer's, whose `repo` must name exactly the repository
 * (`repo`). A private repository's table and parts are opened with its key ring, each bound to the
 * account and key it is read under.
 */
async function readTableAt(
  label: string,
  read: (collection: string, rkey: string) => Promise<VerifiedRecord>,
  key: string,
  of: { repo: string; owner: boolean; holder: RemoteRepo },
): Promise<Omit<TableRead, 'signingKey'> | undefined> {
  const got = await read(REFS_COLLECTION, key);
  if (!got.found) return undefined;
  const sealer = await tableSealer(of.holder, label, got.value);
  const account = of.holder.owner.did;
  const open = (collection: string, rkey: string, value: unknown): unknown =>
    sealer === undefined || typeof value !== 'object' || value === null
      ? value
      : sealer.openTable(account, collection, rkey, value as Record<string, unknown>);
  const stored = parseRefTable(open(REFS_COLLECTION, key, got.value), of.repo, of.owner);
  const parts: FetchedPart[] = [];
  const queue = [...stored.parts];
  await Promise.all(
    Array.from({ length: Math.min(PART_READS, queue.length) }, async () => {
      for (let link = queue.shift(); link !== undefined; link = queue.shift()) {
        const part = await read(REFS_PART_COLLECTION, link.rkey);
        // A part the proof shows absent is left out: joining names it missing.
        if (part.found)
          parts.push({
            rkey: link.rkey,
            cid: part.cid,
            value: open(REFS_PART_COLLECTION, link.rkey, part.value),
          });
      }
    }),
  );
  const table = joinRefTable(stored, parts);
  const at = { table, stored, cid: got.cid, rev: got.rev, commit: got.commit };
  if (sealer === undefined) return { ...at, raw: { value: got.value, parts } };
  for (const r of table.refs) sealer.attachPacks(r.packs);
  // No raw records: a sealed table is never handed on as a view (the agent keeps none of one).
  return at;
}

/**
 * The owner's table record of repository `name` of `did`, checked as every reader checks it
 * (ref-table.ts); `label` names the repository in the sentence that refuses it.
 */
export function parseStoredTable(did: string, name: string, label: string, value: unknown): StoredTable {
  if (isSealed(value))
    throw new KnotlessError(
      'corrupt-remote',
      `The ref table of ${label} is sealed (a private repository's), and a view is never kept of one: it is read from its PDS with the repository's key.`,
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
export function tableRefs(
  remote: RemoteRepo,
  read: Pick<TableRead, 'table' | 'cid' | 'rev'> & Partial<TableRead>,
): RemoteRef[] {
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
 * The repository's ref records alone (no table read), proved whole as {@link readRefSource} proves
 * them, with the commit they were proved at: what a writer that replaces them (a migration onto a
 * table) swaps on. Without a verifier, or with verification turned off, the records as listed and
 * the account's latest commit as its PDS names it, read first.
 */
export async function readProvedRecords(remote: RemoteRepo): Promise<{ refs: RemoteRef[]; commit: string }> {
  const verify = remote.verifier;
  if (verify === undefined || verify.unchecked !== undefined) {
    verify?.unchecked?.();
    const commit = await remote.latestCommit();
    return { refs: await remote.listRefs(), commit };
  }
  const listed = remote.listRefRecords().then(
    (records) => ({ records }),
    (err: unknown) => ({ err }),
  );
  const reads = await openVerifiedReads(remote, verify);
  const got = await listed;
  if ('err' in got) throw got.err;
  const proved = await proveListing(remote, reads, got.records);
  reads.save();
  return { refs: await remote.refsFrom(proved.records), commit: proved.commit };
}

/** Where a repository's refs are: its owner's table, or its ref records (see {@link readRefSource}). */
export type RefSource =
  | { table: TableRead; listed: { listed: ListedRecord[] } | { err: unknown } }
  | { table: undefined; records: ListedRecord[] };

/**
 * The owner's verified table of the repository, with the listing of its older ref records (or the
 * listing's failure) beside it; or, when the proof shows no table, the repository's ref records,
 * proved whole (records/proved-listing.ts: each at the CID listed and none left out) with the same
 * verified reads, unparsed. With verification turned off, the records as listed.
 */
export async function readRefSource(remote: RemoteRepo): Promise<RefSource> {
  const verify = remote.verifier;
  if (verify === undefined) throw new Error(`${remote.label} was opened without a verifier`);
  const listing = remote.listRefRecords().then(
    (listed) => ({ listed }),
    (err: unknown) => ({ err }),
  );
  let table: TableRead | undefined;
  // The owner's verified reads, which the table and, without one, the records are proved with;
  // none with verification turned off (the records are then read as listed).
  let reads: VerifiedReads | undefined;
  let tree: ProofTree | undefined;
  try {
    if (verify.unchecked !== undefined) table = await readRefTable(remote);
    else {
      reads = await openVerifiedReads(remote, verify);
      const opened = reads;
      // The proof that there is no table carries the signed commit and the tree's path near the
      // records' range: where a proof of the records starts.
      const read = await readTableWith(remote, (collection, rkey) =>
        opened.read(collection, rkey, (t) => (tree = t)),
      );
      table = read === undefined ? undefined : { ...read, signingKey: reads.signingKey };
    }
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
  const listed = await listing;
  if (table === undefined) {
    if ('err' in listed) throw listed.err;
    if (reads === undefined) return { table, records: listed.listed };
    // No table: the listing is used only proved whole.
    const proved = await proveListing(remote, reads, listed.listed, tree);
    reads.save();
    return { table, records: proved.records };
  }
  reads?.save();
  return { table, listed };
}

/**
 * Every ref of a repository, HEAD included, as readers use them: from the owner's verified table when
 * there is one (the repository's `dev.knotless.ref` records are then ignored, with one warning naming
 * them and the commits they point at), else from those records, proved whole (see {@link readRefSource}). The listing of the
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
  const source = await readRefSource(remote);
  if (source.table === undefined) {
    remote.layout = 'records';
    return remote.refsFrom(source.records);
  }
  const { table, listed } = source;
  const old: { refs: RemoteRef[] } | { err: unknown } =
    'err' in listed
      ? listed
      : await remote.refsFrom(listed.listed).then(
          (refs) => ({ refs }),
          (err: unknown) => ({ err }),
        );
  remote.layout = 'table';
  tableReads.set(remote, table);
  // Maintainers' tables are read only when the owner's names some: a repository without them
  // costs what it always has.
  const team =
    maintainersOf(table.table, remote.owner.did).length === 0 ? undefined : await readTeamRefs(remote, table);
  if (team === undefined) teamReads.delete(remote);
  else teamReads.set(remote, team);
  if ('err' in old) {
    // The listing is the repository's first request, which carries the check that a cached handle
    // still names the account: a handle that no longer does, or an account gone, is the command's
    // answer, not the records'.
    if (!isKnotlessError(old.err)) throw old.err;
    if (old.err.code === 'unknown-handle' || old.err.code === 'account-inactive') throw old.err;
    remote.warn(
      `the older dev.knotless.ref records of ${remote.label} could not be listed (${old.err.message.replace(/\.$/, '')}); they are ignored, as its ref table holds its refs`,
    );
  } else if (old.refs.length > 0) {
    const named = old.refs.slice(0, NAMED).map(
      (r) =>
        // A commit shortened as git shortens one; a symbolic ref (HEAD) named in full.
        `${safeText(r.record.ref)} at ${safeText(r.record.target?.slice(0, 12) ?? r.record.symref ?? '')}`,
    );
    const more = old.refs.length > NAMED ? `, and ${old.refs.length - NAMED} more` : '';
    remote.warn(
      `${remote.label} keeps its refs in a ref table, so its ${old.refs.length} older dev.knotless.ref record(s) are ignored (${named.join(', ')}${more}): a machine on an older version of knotless wrote them, and its pushes are not seen until it is upgraded`,
    );
  }
  return team === undefined ? tableRefs(remote, table) : teamRemoteRefs(remote, team);
}

/** One maintainer's table of a repository, read (and verified) in the maintainer's own account. */
export interface MemberTable {
  did: string;
  /** The maintainer's verified handle, else their DID: how listings and sentences name them. */
  name: string;
  /** The repository as the maintainer's account holds it: its reader is where their packs are. */
  remote: RemoteRepo;
  /** Undefined when the maintainer holds no table of the repository (they have not pushed to it). */
  read: Omit<TableRead, 'signingKey'> | undefined;
}

/** A repository with maintainers, read: every writer's table and the refs the rule computes. */
export interface TeamRead {
  owner: TableRead;
  members: MemberTable[];
  /** Maintainers whose table could not be read (their PDS down, a DID that does not resolve). */
  unread: { did: string; why: string }[];
  /** The repository's refs by the rule (records/team-refs.ts), tombstones included (no target). */
  refs: Map<string, TeamRef>;
}

/** The team each remote's last {@link readRepoRefs} read, when its owner's table names maintainers. */
const teamReads = new WeakMap<RemoteRepo, TeamRead>();

/** The team the last {@link readRepoRefs} of `remote` read; undefined without maintainers. */
export function lastTeamRead(remote: RemoteRepo): TeamRead | undefined {
  return remote.layout === 'table' ? teamReads.get(remote) : undefined;
}

/**
 * Takes `team` as what `remote`'s refs are computed from, as if {@link readRepoRefs} had just read
 * it: the warm agent's view of a team, whose tables a push's write and its reads after it prove.
 */
export function useTeamRead(remote: RemoteRepo, team: TeamRead): void {
  useTableRead(remote, team.owner);
  teamReads.set(remote, team);
}

/**
 * A maintainer's table of the repository from its records (the warm agent's view of it, from their
 * checked event stream): checked as {@link readMemberTable} checks one, its `repo` naming exactly
 * the owner's repository, its parts against the CIDs it names.
 */
export function parseMemberRead(
  owner: string,
  name: string,
  label: string,
  got: { value: unknown; cid: string; rev: string; commit: string },
  parts: FetchedPart[],
): Omit<TableRead, 'signingKey'> {
  if (isSealed(got.value))
    throw new KnotlessError(
      'corrupt-remote',
      `${label} is sealed (a private repository's), and a view is never kept of one: it is read from its PDS with the repository's key.`,
    );
  const stored = parseRefTable(got.value, `at://${owner}/${REPO_COLLECTION}/${name}`, false);
  const table = joinRefTable(stored, parts);
  return { table, stored, cid: got.cid, rev: got.rev, commit: got.commit, raw: { value: got.value, parts } };
}

/** A team from its tables as read: the repository's refs computed from them with the rule. */
export function teamOf(
  remote: RemoteRepo,
  owner: TableRead,
  members: MemberTable[],
  unread: TeamRead['unread'] = [],
): TeamRead {
  const sorted = [...members].sort((a, b) => compareRefNames(a.did, b.did));
  const refs = teamRefs(remote.owner.did, [
    teamTable(remote.owner.did, owner.table),
    ...sorted.map((m) => teamTable(m.did, m.read?.table)),
  ]);
  return { owner, members: sorted, unread, refs };
}

/**
 * A maintainer's table of the repository, in the maintainer's account, under the key format.md
 * gives it (`<repo>~<owner DID>`), verified against that account's own signing key. Only the
 * account it is in says who wrote it; its `repo` must name exactly the owner's repository.
 */
export async function readMemberTable(remote: RemoteRepo, did: string): Promise<MemberTable> {
  const member = await remote.member(did);
  if (member === undefined) throw new Error(`${remote.label} was opened without a way to read maintainers`);
  const verify = member.verifier;
  if (verify === undefined) throw new Error(`${remote.label} was opened without a verifier`);
  const name = member.owner.handle ?? did;
  const label = `${name}'s refs of ${remote.label}`;
  const key = refTableKey(remote.name, remote.owner.did, did);
  const of = { repo: `at://${remote.owner.did}/${REPO_COLLECTION}/${remote.name}`, owner: false };
  if (verify.unchecked !== undefined) {
    verify.unchecked();
    const read = await readTableAt(
      label,
      (collection, rkey) =>
        verifiedRead({
          ...clientOf(verify, verify.service(undefined)),
          transport: verify.transport,
          pds: verify.service(undefined),
          did,
          collection,
          rkey,
          signingKey: undefined,
          name: label,
        }),
      key,
      { ...of, holder: member },
    );
    return { did, name, remote: member, read };
  }
  const reads = await openVerifiedReads(member, verify);
  const read = await readTableAt(label, reads.read, key, { ...of, holder: member });
  reads.save();
  return { did, name, remote: member, read };
}

/** A table's entries as the rule reads them: each ref's value (none for a tombstone) and `over`. */
export function teamTable(did: string, table: RefTable | undefined): TeamTable {
  return {
    did,
    entries: new Map(
      (table?.refs ?? []).map((r) => [
        r.ref,
        r.target === undefined ? { over: r.over ?? [] } : { target: r.target, over: r.over ?? [] },
      ]),
    ),
  };
}

/**
 * Reads the tables of the maintainers the owner's table names, all at once, and computes the
 * repository's refs from them with the rule. A maintainer whose table cannot be read (their PDS
 * down, a DID that does not resolve, a table that breaks a rule) is left out with one warning naming
 * them: the repository is read from the others. A mistake of this program is not a warning.
 */
export async function readTeamRefs(remote: RemoteRepo, owner: TableRead): Promise<TeamRead> {
  const dids = maintainersOf(owner.table, remote.owner.did);
  const members: MemberTable[] = [];
  const unread: TeamRead['unread'] = [];
  await Promise.all(
    dids.map(async (did) => {
      try {
        members.push(await readMemberTable(remote, did));
      } catch (err) {
        if (!isKnotlessError(err)) throw err;
        unread.push({ did, why: err.message.replace(/\.$/, '') });
      }
    }),
  );
  for (const u of unread.sort((a, b) => compareRefNames(a.did, b.did)))
    remote.warn(
      `the refs maintainer ${safeText(u.did)} pushed to ${remote.label} could not be read (${u.why}); the repository is read from the others`,
    );
  return teamOf(remote, owner, members, unread);
}

/** A ref name for a value the rule did not choose: `refs/maintainers/<who>/<name without refs/>`. */
export function divergentName(who: string, ref: string): string {
  const safe = isSafeRefName(`refs/maintainers/${who}/x`) ? who : who.replace(/[^A-Za-z0-9.-]/g, '-');
  return `refs/maintainers/${safe}/${ref.replace(/^refs\//, '')}`;
}

/**
 * A team's refs in the form ref records are read in: HEAD (the owner's `head`), each ref's value
 * from the table of the writer whose entry counts (a maintainer's packs read from their account),
 * and every value the rule did not choose under `refs/maintainers/<handle>/…`, so that nothing
 * acknowledged becomes unreachable from a listing.
 */
export function teamRemoteRefs(remote: RemoteRepo, team: TeamRead): RemoteRef[] {
  const writers = new Map<
    string,
    { name: string; read: Omit<TableRead, 'signingKey'>; key: string; holder?: RemoteRepo }
  >();
  writers.set(remote.owner.did, {
    name: remote.owner.handle ?? remote.owner.did,
    read: team.owner,
    key: refTableKey(remote.name, remote.owner.did, remote.owner.did),
  });
  for (const m of team.members)
    if (m.read !== undefined)
      writers.set(m.did, {
        name: m.name,
        read: m.read,
        key: refTableKey(remote.name, remote.owner.did, m.did),
        holder: m.remote,
      });
  const out: RemoteRef[] = [];
  const { table } = team.owner;
  const at = { repo: remote.name, updatedAt: table.updatedAt };
  if (table.head !== undefined)
    out.push({
      key: `${writers.get(remote.owner.did)!.key}#HEAD`,
      cid: team.owner.cid,
      rev: team.owner.rev,
      record: { ...at, ref: 'HEAD', symref: table.head, packs: [] },
    });
  const valueOf = (ref: string, listed: string, did: string): RemoteRef | undefined => {
    const w = writers.get(did);
    const e = w?.read.table.refs.find((r) => r.ref === ref);
    if (w === undefined || e?.target === undefined) return undefined;
    const holder = w.holder;
    const packs =
      holder === undefined ? e.packs : e.packs.map((p) => ({ ...p, holder: { did, reader: holder.reader } }));
    const record = { ...at, ref: listed, target: e.target, packs };
    return {
      key: `${w.key}#${ref}`,
      cid: w.read.cid,
      rev: w.read.rev,
      record: e.peeled === undefined ? record : { ...record, peeled: e.peeled },
    };
  };
  const divergent: RemoteRef[] = [];
  for (const [ref, value] of team.refs) {
    const chosen = value.target === undefined ? undefined : valueOf(ref, ref, value.by);
    if (chosen !== undefined) out.push(chosen);
    for (const d of value.divergent ?? []) {
      if (d.target === undefined) continue;
      const name = writers.get(d.did)?.name ?? d.did;
      const shown = valueOf(ref, divergentName(name, ref), d.did);
      if (shown !== undefined) divergent.push(shown);
    }
  }
  return [...out, ...divergent.sort((a, b) => compareRefNames(a.record.ref, b.record.ref))];
}
