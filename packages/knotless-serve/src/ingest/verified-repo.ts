// An account's knotless records as its signed repository proves them (appview.md, "Backfill";
// security.md, "The appview"): one com.atproto.sync.getRepo, a CAR of the whole repository, whose
// blocks must hash to their CIDs, whose commit must be the account's and signed by the `#atproto` key
// of its DID document, and whose Merkle search tree is walked for every key under `dev.knotless.`.
// A listing (listRecords) proves nothing: a PDS, or anything between it and the appview, could
// change, add, leave out or replay records in it unseen. The checks are @atproto/repo's.
import { safeText } from 'knotless-core/text/terminal';
import { decodeBlock, jsonForm } from 'knotless-core/records/proof';
import { BodyTooLarge } from 'knotless-core/xrpc/http-pool';
import type { Transport } from 'knotless-core';
import type * as RepoModule from '@atproto/repo';

/**
 * The most of an account's repository read: the whole repository (Bluesky posts and all) is what
 * proves that its knotless records are all there. A larger one is refused, and its account not
 * indexed by a backfill (its event stream's commits still are).
 */
export const ACCOUNT_REPO_BYTES = 256 * 1024 * 1024;

/** The prefix of every knotless collection's keys in the tree. */
const PREFIX = 'dev.knotless.';

/** A record as the verified tree holds it, in the JSON form listings give. */
export interface VerifiedRecord {
  collection: string;
  rkey: string;
  cid: string;
  value: unknown;
}

/** What a verified read of the repository gives. */
export interface VerifiedRepo {
  /** The signed commit's revision. */
  rev: string;
  /** The key that signed it. */
  key: string;
  records: VerifiedRecord[];
}

/** A repository that was read but did not prove what it holds: nothing from it may be indexed. */
export class Unverified extends Error {
  constructor(did: string, pds: string, why: string, options?: ErrorOptions) {
    super(
      `the repository of ${did} from ${safeText(pds, 200)} could not be verified (${why}); nothing from it was indexed`,
      options,
    );
  }
}

/**
 * Reads the account's repository from `pds` and verifies it against `key` (the `#atproto` key of its
 * DID document; `freshKey` reads the document again, asked once when the signature does not match:
 * the key may have rotated since it was read). `newest` is the revision verified before, with the
 * key and PDS it was verified at: a repository at an older revision, at the same key and PDS, is a
 * replay and refused.
 */
export async function readVerifiedRepo(opts: {
  transport: Transport;
  pds: string;
  did: string;
  key: string;
  freshKey: () => Promise<string>;
  newest: { rev: string; key: string | null; pds: string | null } | undefined;
  signal?: AbortSignal;
}): Promise<VerifiedRepo> {
  const { did, pds } = opts;
  const url = new URL('/xrpc/com.atproto.sync.getRepo', pds);
  url.searchParams.set('did', did);
  let res: Awaited<ReturnType<Transport['request']>>;
  try {
    res = await opts.transport.request(url, {
      method: 'GET',
      headers: { accept: 'application/vnd.ipld.car' },
      body: null,
      maxBytes: ACCOUNT_REPO_BYTES,
      signal: opts.signal ?? AbortSignal.timeout(10 * 60_000),
    });
  } catch (err) {
    if (err instanceof BodyTooLarge)
      throw new Unverified(
        did,
        pds,
        `the repository is larger than the ${ACCOUNT_REPO_BYTES / 1024 / 1024} MiB the appview reads to verify it`,
        { cause: err },
      );
    throw err;
  }
  if (res.status < 200 || res.status > 299)
    throw new Error(`reading the repository of ${did} from ${safeText(pds, 200)}: HTTP ${res.status}`);
  const repo = await import('@atproto/repo');
  let root: Awaited<ReturnType<typeof repo.readCarWithRoot>>;
  let loaded: InstanceType<typeof repo.Repo>;
  try {
    root = await repo.readCarWithRoot(new Uint8Array(res.body));
    loaded = await repo.Repo.load(new repo.MemoryBlockstore(root.blocks), root.root);
  } catch (err) {
    throw new Unverified(did, pds, 'the answer is not a repository whose blocks match their CIDs', {
      cause: err,
    });
  }
  if (loaded.did !== did) throw new Unverified(did, pds, "the repository is another account's");
  let key = opts.key;
  let signed = await signedBy(repo, loaded.commit, key);
  if (!signed) {
    key = await opts.freshKey();
    signed = key !== opts.key && (await signedBy(repo, loaded.commit, key));
  }
  if (!signed) throw new Unverified(did, pds, "the commit's signature does not match the account's key");
  const rev = loaded.commit.rev;
  const newest = opts.newest;
  if (newest !== undefined && rev < newest.rev && newest.key === key && newest.pds === pds)
    throw new Unverified(
      did,
      pds,
      `the repository is at revision ${safeText(rev, 20)}, older than ${newest.rev} already verified`,
    );
  const records: VerifiedRecord[] = [];
  try {
    for (const leaf of await loaded.data.listWithPrefix(PREFIX)) {
      const slash = leaf.key.indexOf('/');
      const bytes = root.blocks.get(leaf.value);
      if (bytes === undefined) throw new Error(`the block of ${leaf.key} is missing`);
      records.push({
        collection: leaf.key.slice(0, slash),
        rkey: leaf.key.slice(slash + 1),
        cid: leaf.value.toString(),
        value: jsonForm(decodeBlock(bytes)),
      });
    }
  } catch (err) {
    throw new Unverified(did, pds, "the repository's tree is incomplete or malformed", { cause: err });
  }
  return { rev, key, records };
}

async function signedBy(
  repo: typeof RepoModule,
  commit: Parameters<typeof RepoModule.verifyCommitSig>[0],
  key: string,
): Promise<boolean> {
  try {
    return await repo.verifyCommitSig(commit, key);
  } catch (err) {
    // A key of a kind @atproto/crypto cannot check verifies nothing.
    if (err instanceof Error) return false;
    throw err;
  }
}
