import type { BlobCache } from '../../cache/blob-cache.ts';
import type { PushReason } from '../../errors.ts';
import { presentObjects } from '../../git/objects.ts';
import type { PackEntry, RefRecord } from '../../records/ref-record.ts';
import type { RemoteRef, RemoteRepo } from '../../records/remote-repo.ts';
import type { Chatter } from '../../text/progress.ts';
import type { Authorizer } from '../../xrpc/client.ts';
import type { ProtectionCheck, Update } from './check.ts';

/** What git asked of the push besides its refs (`option dry-run`, `atomic`, `cas`). */
export interface PushOptions {
  dryRun: boolean;
  atomic: boolean;
  /** `--force-with-lease` expectations: ref → expected oid (all zeros: must not exist). */
  cas: Map<string, string>;
}

/** The refs git was shown: by name (HEAD included), and apart those that several records claim. */
export interface Listing {
  refs: Map<string, RemoteRef>;
  contested: Map<string, RemoteRef[]>;
  /** These are the refs git was listed and decided the push on (not a listing read afterwards). */
  shownToGit: boolean;
}

/**
 * Everything a push works with, made by its front end (the helper, from its state): the remote and
 * its clients, the caches, the repository pushed from, the progress reporter and git's options.
 */
export interface PushEnv {
  remote: RemoteRepo;
  auth: Authorizer;
  /**
   * Where new packs are stored when it is not the owner's account: a maintainer's push stores them
   * in the maintainer's (format.md, "Teams"), set by the push once it knows the pusher is one.
   */
  packsTo?: RemoteRepo;
  /** The account pushing: the repository's owner, or a maintainer the owner's table names. */
  pusher: { did: string; handle: string };
  /** The repository pushed from (its git directory). */
  gitDir: string;
  /** Its object directory (where a fold borrows the objects its packs build on), asked when needed. */
  objectsDir: () => Promise<string>;
  cache: BlobCache;
  cacheDir: string;
  /** Fold the small packs at the end of a pack list into the push's write (off with KNOTLESS_COMPACT=0). */
  fold: boolean;
  /** Write the structure and the blobs as two packs (KNOTLESS_PACK_SPLIT=1). */
  split: boolean;
  /** Move a public repository on ref records onto its ref table before writing (on unless KNOTLESS_REF_TABLE=0). */
  migrate?: boolean;
  chatter: Chatter;
  options: PushOptions;
  /**
   * The refs git decided on, read once the pusher is known to be the owner (git lists before it
   * pushes, so this is normally that listing).
   */
  listing: () => Promise<Listing>;
  /** Told of refs written or settled, as they are (the helper folds them into its cached view). */
  remember: (written: Written[]) => Promise<void>;
  /** The repository's branch protection: asked only of an update that would rewrite or delete a branch. */
  protection?: ProtectionCheck;
}

/** How one ref's update ended; `record` is what the remote now holds (null: deleted). */
export interface Written {
  dst: string;
  /** Why git is told the ref failed (absent: it was updated). */
  error?: PushReason;
  record?: RemoteRef | null;
  /** A compare-and-swap found the ref changed: whatever view the push used was stale. */
  conflicted?: boolean;
  /** The PDS still refused a blob the record listed after the push rebuilt its pack list. */
  blobMissing?: boolean;
}

/** What every writer needs. */
export interface WriteJob {
  env: PushEnv;
  /** The refs as git was shown them. */
  refs: Map<string, RemoteRef>;
  updates: Update[];
  /** The pack list the records carry (rebuilt once when the PDS says a blob it lists is gone). */
  source: PackSource;
  present: (oid: string) => boolean;
  /** The branch HEAD should name, when the repository has no HEAD yet. */
  head: string | undefined;
}

/** Compare-and-swap retries per ref, and commit-race retries per atomic push. */
export const MAX_ATTEMPTS = 5;
/** The PDS's limit on writes in one commit. */
export const MAX_WRITES_PER_COMMIT = 200;

/** git's reason for a ref whose write kept naming blobs the PDS no longer holds. */
export const BLOB_GONE: PushReason = 'a pack it builds on was removed';

/**
 * Whether this repository has an object. `present` knows the values the push started from; a value
 * read back after a conflict is new, so it is looked up (another process may have pushed it from here).
 */
export async function hasObject(job: WriteJob, oid: string): Promise<boolean> {
  return job.present(oid) || (await presentObjects([oid], { gitDir: job.env.gitDir })).has(oid);
}

/** The record a ref gets when it is written to point at `u.oid`, with `packs`. */
export function recordFor(remote: RemoteRepo, u: Update, packs: PackEntry[]): RefRecord {
  return {
    repo: remote.name,
    ref: u.dst,
    target: u.oid!,
    ...(u.peeled === undefined ? {} : { peeled: u.peeled }),
    packs,
    updatedAt: new Date().toISOString(),
  };
}

/**
 * The pack list a push's records carry. When the PDS says a blob it lists is gone (a compaction or
 * a rewind elsewhere freed it after the refs were read), each ref's loop asks for a rebuild
 * (`swapLoop`'s `relist`): the first asks, the others wait on the same one, so a push lists the refs
 * again and builds and uploads a pack at most once, however many refs it writes; refs whose loops
 * start later take the rebuilt list at once.
 */
export class PackSource {
  #packs: PackEntry[];
  readonly #build: () => Promise<PackEntry[]>;
  #rebuilt: Promise<PackEntry[]> | undefined;

  constructor(packs: PackEntry[], build: () => Promise<PackEntry[]>) {
    this.#packs = packs;
    this.#build = build;
  }

  /** The list to write now: the first one, or the rebuilt one once it is there. */
  get packs(): PackEntry[] {
    return this.#packs;
  }

  /** Rebuilds the list from the refs as they are now, once for the whole push. */
  rebuild(): Promise<PackEntry[]> {
    this.#rebuilt ??= this.#build().then((packs) => (this.#packs = packs));
    return this.#rebuilt;
  }
}
