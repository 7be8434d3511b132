// `knotless verify` (cli.md, "Verification"): what a repository's refs were verified against, and
// each ref's verdict. A repository with a ref table is verified as every reader verifies it
// (records/read-refs.ts): the table is one signed record, so its refs, and that there are no others,
// stand or fall together. A repository still on `dev.knotless.ref` records is proved as every reader
// proves its listing (records/proved-listing.ts): each record at the CID the listing gave, and no
// other key in the repository's range. When that does not hold, each record listed is read again with
// its own proof (com.atproto.sync.getRecord, a few at once), so that the verdicts say which ref does
// not hold (format.md, "Verified").
import { REF_COLLECTION } from './collections.ts';
import { PROOF_READS, proveListing } from './proved-listing.ts';
import { openVerifiedReads, readTableWith, tableRefs } from './read-refs.ts';
import type { RefRecord } from './ref-record.ts';
import { parseRemoteRef } from './remote-ref.ts';
import type { RemoteRepo } from './remote-repo.ts';
import { refusalReason, type ProofTree } from './verified-read.ts';

/** One ref and whether the account's signed commit vouches for it. */
export interface RefVerdict {
  ref: string;
  /** The commit it points at; a symbolic ref (HEAD) names `symref` instead. */
  target?: string;
  symref?: string;
  verified: boolean;
  /** Why it is not verified. */
  why?: string;
}

/** What a repository's refs were verified against, and each ref's verdict. */
export interface RepoVerdict {
  did: string;
  handle: string | undefined;
  /** The PDS the proofs were read from. */
  pds: string;
  /** The `#atproto` key of the account's DID document, as a `did:key`. */
  key: string;
  /** `table`: one signed record holds the refs; `records`: one record per ref. */
  layout: 'table' | 'records';
  /** Whether the listing is proved complete, not only each ref in it. */
  complete: boolean;
  /** Why the listing is not proved complete (then some ref may still be verified on its own). */
  incomplete?: string;
  /** The signed commit the refs were proved at (the newest of them, for records); none without refs. */
  rev: string | undefined;
  commit: string | undefined;
  /** When the proofs were checked (ISO 8601). */
  checkedAt: string;
  refs: RefVerdict[];
}

/**
 * Verifies every ref of the repository against the account's signed commit. A table that cannot be
 * verified, or a DID document that cannot be read, fails the whole call with its sentence
 * (unverified-remote, exit 21); a ref record that cannot be verified is a verdict.
 */
export async function verifyRepo(remote: RemoteRepo): Promise<RepoVerdict> {
  const verify = remote.verifier;
  if (verify === undefined) throw new Error(`${remote.label} was opened without a verifier`);
  // Started beside the table's read: a repository without a table waits no longer for it.
  const listing = remote.listRefRecords().then(
    (records) => ({ records }),
    (err: unknown) => ({ err }),
  );
  const reads = await openVerifiedReads(remote, verify);
  const at = {
    did: remote.owner.did,
    handle: remote.owner.handle,
    pds: reads.pds,
    key: reads.signingKey,
  };
  // The proof that there is no table carries the signed commit the records are proved against.
  let tree: ProofTree | undefined;
  const table = await readTableWith(remote, (collection, rkey) =>
    reads.read(collection, rkey, (t) => (tree = t)),
  );
  if (table !== undefined) {
    reads.save();
    const refs = tableRefs(remote, { ...table, signingKey: reads.signingKey }).map((r): RefVerdict => ({
      ...targetOf(r.record),
      verified: true,
    }));
    const checkedAt = new Date().toISOString();
    return { ...at, layout: 'table', complete: true, rev: table.rev, commit: table.commit, checkedAt, refs };
  }
  const got = await listing;
  if ('err' in got) throw got.err;
  // Proved whole as every reader proves it: then every ref is verified, and nothing was left out.
  let incomplete: string;
  try {
    const whole = await proveListing(remote, reads, got.records, tree);
    reads.save();
    const refs = (await remote.refsFrom(whole.records)).map((r): RefVerdict => ({
      ...targetOf(r.record),
      verified: true,
    }));
    const checkedAt = new Date().toISOString();
    return {
      ...at,
      layout: 'records',
      complete: true,
      rev: whole.rev,
      commit: whole.commit,
      checkedAt,
      refs,
    };
  } catch (err) {
    const why = refusalReason(err);
    if (why === undefined) throw err;
    incomplete = why;
  }
  // Not proved whole: each ref listed gets its own verdict, to say which do not hold.
  const listed = { refs: await remote.refsFrom(got.records) };
  const verdicts: RefVerdict[] = new Array<RefVerdict>(listed.refs.length);
  let newest: { rev: string; commit: string } | undefined;
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(PROOF_READS, listed.refs.length) }, async () => {
      for (let i = next++; i < listed.refs.length; i = next++) {
        const r = listed.refs[i]!;
        const ref = targetOf(r.record);
        try {
          const got = await reads.read(REF_COLLECTION, r.key);
          if (newest === undefined || got.rev > newest.rev) newest = { rev: got.rev, commit: got.commit };
          verdicts[i] = !got.found
            ? { ...ref, verified: false, why: "the account's signed commit does not hold its record" }
            : got.cid !== r.cid || !sameRef(proved(remote, r.key, got.cid, got.value), r.record)
              ? { ...ref, verified: false, why: 'the signed commit holds another version of its record' }
              : { ...ref, verified: true };
        } catch (err) {
          // A proof that does not hold is this ref's verdict; a PDS that does not answer fails the call.
          const why = refusalReason(err);
          if (why === undefined) throw err;
          verdicts[i] = { ...ref, verified: false, why };
        }
      }
    }),
  );
  reads.save();
  return {
    ...at,
    layout: 'records',
    complete: false,
    incomplete,
    rev: newest?.rev,
    commit: newest?.commit,
    checkedAt: new Date().toISOString(),
    refs: verdicts,
  };
}

/**
 * The ref record the proof holds, read as the listing's records are read (opened, in a private
 * repository); undefined when it is no valid ref record of this repository (warned of).
 */
function proved(remote: RemoteRepo, key: string, cid: string, value: unknown): RefRecord | undefined {
  return parseRemoteRef(
    { name: remote.name, sealer: remote.sealer, warn: (m) => remote.warn(m) },
    key,
    cid,
    value,
  )?.record;
}

/** Whether the proved record says what the listing said: the same ref, pointing at the same thing. */
function sameRef(a: RefRecord | undefined, b: RefRecord): boolean {
  return a !== undefined && a.ref === b.ref && a.target === b.target && a.symref === b.symref;
}

function targetOf(record: {
  ref: string;
  target?: string;
  symref?: string;
}): Pick<RefVerdict, 'ref' | 'target' | 'symref'> {
  return {
    ref: record.ref,
    ...(record.target === undefined ? {} : { target: record.target }),
    ...(record.symref === undefined ? {} : { symref: record.symref }),
  };
}
