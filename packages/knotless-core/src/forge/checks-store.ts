// Checks and protection records on the PDSes: a runner's check written in its own account, a
// repository's protection read from and written in its owner's, checks read from the accounts that
// can count. The parsers are handed in (forge/read.ts, with the lexicons each front end bundles).
import type { Identity } from '../identity/resolver.ts';
import { KnotlessError, isKnotlessError } from '../errors.ts';
import { safeText } from '../text/terminal.ts';
import {
  UNTRUSTED_SHOWN,
  branchRules,
  commitChecks,
  latestVerdicts,
  protectionKey,
  repoProtection,
  trustedRunners,
  unmetChecks,
  type BranchRule,
  type ListedCheck,
  type RepoProtection,
  type ShownCheck,
  type UnmetCheck,
} from './checks.ts';
import {
  CHECK,
  PROTECTION,
  checkToWrite,
  repoUri,
  writeRecord,
  type BranchProtection,
  type CheckRecord,
  type ProtectionRecord,
} from './records.ts';
import type { ForgeStore } from './store.ts';

type Auth = Parameters<ForgeStore['create']>[0];

/** Writes a check in the session's account, checked first exactly as its readers will check it. */
export async function writeCheck(
  store: ForgeStore,
  auth: Auth,
  read: (value: unknown) => Promise<CheckRecord>,
  draft: Omit<CheckRecord, 'createdAt'>,
): Promise<{ made: { uri: string; cid: string; rkey: string }; record: CheckRecord }> {
  const record: CheckRecord = { ...draft, createdAt: new Date().toISOString() };
  const json = writeRecord(CHECK, record);
  await checkToWrite(read, json, 'check');
  return { made: await store.create(auth, CHECK, json), record };
}

/** An account a protection or its checks are read from. */
type Account = Pick<Identity, 'did' | 'pds'>;

/**
 * The protection that counts for the owner's repository `name`: the owner's record and the records
 * of `maintainers` (the DIDs the owner's ref table lists now; read by the caller), each read under
 * its key in its writer's own account (forge/checks.ts `protectionKey`), in parallel, and judged by
 * `repoProtection`. A record that fails its checks is skipped with one warning through the store. A
 * maintainer's record that cannot be read at all (their PDS down, a DID that does not resolve)
 * fails the read in one sentence naming them: their requirements are never left out unseen.
 */
export async function readRepoProtection(
  store: ForgeStore,
  owner: Account,
  name: string,
  read: (value: unknown) => Promise<ProtectionRecord>,
  maintainers: readonly string[],
  resolve: (did: string) => Promise<Account & { handle?: string | undefined }>,
  warn: (message: string) => void = () => {},
): Promise<RepoProtection> {
  const uri = repoUri(owner.did, name);
  const others = [...new Set(maintainers)].filter((d) => d !== owner.did);
  const reads = await Promise.all([
    store.get(owner, PROTECTION, name, read),
    ...others.map(async (did) => {
      try {
        return await store.get(await resolve(did), PROTECTION, protectionKey(name, owner.did, did), read);
      } catch (err) {
        if (!(err instanceof KnotlessError)) throw err;
        throw new KnotlessError(
          err.code,
          `The branch protection that maintainer ${safeText(did)} keeps for ${safeText(uri, 200)} could not be read (${err.message.replace(/\.$/, '')}); a maintainer's requirements are never left out, so try again later, or the owner can remove the maintainer.`,
          { cause: err, reason: err.reason },
        );
      }
    }),
  ]);
  const listed = reads.flatMap((g) =>
    g === undefined ? [] : [{ did: g.did, rkey: g.rkey, record: g.value }],
  );
  return repoProtection(listed, uri, others, warn);
}

/**
 * Sets (or, with `branch` undefined as protection, removes) one branch's protection in the
 * session's own protection record of `owner`'s repository `name` (the owner's, or a maintainer's
 * under its key: forge/checks.ts `protectionKey`), with compare-and-swap on the record as read; the
 * record is deleted when no branch is left. Whether the session may (the owner, or a maintainer the
 * owner lists) is the caller's to check. Returns the record as written.
 */
export async function writeBranchProtection(
  store: ForgeStore,
  auth: Auth,
  owner: string,
  name: string,
  read: (value: unknown) => Promise<ProtectionRecord>,
  branch: string,
  protection: BranchProtection | undefined,
): Promise<ProtectionRecord | undefined> {
  const me = { did: auth.session.did, pds: auth.session.pds };
  const key = protectionKey(name, owner, me.did);
  const uri = repoUri(owner, name);
  const raw = await store.getRaw(me, PROTECTION, key);
  // One that fails its checks, or names another repository, is replaced whole, never merged into.
  const got =
    raw === undefined
      ? undefined
      : await read(raw.value).catch((err: unknown) => {
          if (isKnotlessError(err, 'corrupt-remote')) return undefined;
          throw err;
        });
  const current = got !== undefined && got.repo === uri ? got : undefined;
  const others = (current?.branches ?? []).filter((b) => b.branch !== branch);
  const branches = protection === undefined ? others : [...others, protection];
  branches.sort((a, b) => (a.branch < b.branch ? -1 : a.branch > b.branch ? 1 : 0));
  if (branches.length === 0) {
    if (raw !== undefined) await store.delete(auth, PROTECTION, key);
    return undefined;
  }
  const record: ProtectionRecord = { repo: uri, branches, createdAt: new Date().toISOString() };
  const json = writeRecord(PROTECTION, record);
  await checkToWrite(read, json, 'protection');
  if (raw === undefined) await store.create(auth, PROTECTION, json, key);
  else await store.put(auth, PROTECTION, key, json, raw.cid);
  return record;
}

/** Every valid check record in `accounts` (each read once), with its runner and record key. */
export async function readChecks(
  store: ForgeStore,
  accounts: readonly Pick<Identity, 'did' | 'pds'>[],
  read: (value: unknown) => Promise<CheckRecord>,
): Promise<ListedCheck[]> {
  const seen = new Set<string>();
  const unique = accounts.filter((a) => !seen.has(a.did) && seen.add(a.did));
  const lists = await Promise.all(unique.map((a) => store.list(a, CHECK, read)));
  return lists.flat().map((s) => ({ runner: s.did, rkey: s.rkey, record: s.value }));
}

/**
 * How many check records of one account that does not count are read, newest first, at most: a
 * check on an old commit of such an account may go unread, and the listing says so.
 */
export const OTHERS_READ = 1000;

/** What was read of an account that does not count: its checks on one commit, and whether all. */
interface OthersRead {
  checks: ListedCheck[];
  /** How many of its check records were read, and whether that was all it has. */
  read: number;
  complete: boolean;
}

/**
 * The checks on `commit` of `repo` in an account that does not count, read newest first (so that
 * each verdict read is its latest) until the account has no more, more of them than a listing
 * shows are found, or {@link OTHERS_READ} records were read: a page of 100 a request, so at most
 * ten requests, however many checks the account wrote.
 */
async function readOthers(
  store: ForgeStore,
  account: Pick<Identity, 'did' | 'pds'>,
  read: (value: unknown) => Promise<CheckRecord>,
  repo: string,
  commit: string,
): Promise<OthersRead> {
  const checks: ListedCheck[] = [];
  let count = 0;
  let cursor: string | undefined;
  for (;;) {
    const page = await store.page(account, CHECK, read, Math.min(100, OTHERS_READ - count), cursor);
    count += page.read;
    for (const s of page.records)
      if (s.value.repo === repo && s.value.commit === commit)
        checks.push({ runner: s.did, rkey: s.rkey, record: s.value });
    if (page.complete || page.cursor === undefined) return { checks, read: count, complete: true };
    if (count >= OTHERS_READ || latestVerdicts(checks).length > UNTRUSTED_SHOWN)
      return { checks, read: count, complete: false };
    cursor = page.cursor;
  }
}

/** What a commit's checks come to for a branch (or for every protected branch when none is named). */
export interface CommitVerdict {
  protection: RepoProtection;
  /** The branch's rules, one an account protecting it (empty: not protected, or no branch named). */
  rules: BranchRule[];
  /** Every context the branch's rules require, each once; undefined when nothing protects it. */
  required: string[] | undefined;
  /** Every check read: all of the runners that count, and what was read of the others. */
  shown: ShownCheck[];
  unmet: UnmetCheck[];
  /** Each shown runner's name: its verified handle, else its DID. */
  names: Map<string, string>;
  /** Runners that do not count whose older check records were not read: how many were, the newest. */
  cut: { runner: string; name: string; read: number }[];
  /**
   * Verdicts by runners that do not count that a bounded reader (the appview's index) left out of
   * `shown`, and whether `count` is only a lower bound; absent when it left none out.
   */
  left?: { count: number; atLeast: boolean };
}

/** How a front end reads what a verdict needs: accounts resolved, records checked (forge/read.ts). */
export interface VerdictReaders {
  resolve: (did: string) => Promise<{ did: string; pds: string; handle?: string | undefined }>;
  check: (value: unknown) => Promise<CheckRecord>;
  protection: (value: unknown) => Promise<ProtectionRecord>;
  /** Where a skipped protection record is said (one warning a record). */
  warn?: (message: string) => void;
}

/** Every context `rules` require, each once, in their order; undefined when there are no rules. */
export function requiredOf(rules: readonly BranchRule[]): string[] | undefined {
  return rules.length === 0 ? undefined : [...new Set(rules.flatMap((r) => r.requiredChecks))];
}

/**
 * The checks of `commit` in the owner's repository `name`, as `branch`'s protection judges them
 * (the owner's and that of `maintainers`, the DIDs the owner's ref table lists now: readRepoProtection;
 * with no branch, a runner any protected branch trusts is marked trusted), read from the PDSes:
 * the accounts that can count (the owner's, each protecting maintainer's and the runners their
 * protection trusts) are read whole, and `extra` beside them, so that their checks are shown,
 * named and untrusted: only as far as a listing needs (readOthers: an account that writes
 * thousands of checks costs a few requests), or whole with `othersWhole` (asked for by name: `check
 * list --all`). The CLI's merge and the appview's merge button both decide with this.
 */
export async function commitVerdict(
  store: ForgeStore,
  readers: VerdictReaders,
  owner: Pick<Identity, 'did' | 'pds'>,
  name: string,
  commit: string,
  branch: string | undefined,
  extra: readonly (Pick<Identity, 'did' | 'pds'> & { handle?: string | undefined })[],
  maintainers: readonly string[],
  othersWhole = false,
): Promise<CommitVerdict> {
  const protection = await readRepoProtection(
    store,
    owner,
    name,
    readers.protection,
    maintainers,
    readers.resolve,
    readers.warn,
  );
  const rules = branch === undefined ? [] : branchRules(protection, branch);
  const trusted = trustedRunners(protection, branch);
  const runners = await Promise.all(trusted.map((did) => readers.resolve(did)));
  const counted = [owner, ...runners];
  const uri = repoUri(owner.did, name);
  const checks = await readChecks(store, counted, readers.check);
  const seen = new Set(counted.map((a) => a.did));
  const others = extra.filter((a) => !seen.has(a.did) && seen.add(a.did));
  const read = othersWhole
    ? [{ checks: await readChecks(store, others, readers.check), read: 0, complete: true }]
    : await Promise.all(others.map((a) => readOthers(store, a, readers.check, uri, commit)));
  const shown = commitChecks([...checks, ...read.flatMap((r) => r.checks)], uri, commit, trusted);
  // One name a runner, and one an account whose requirement a reason names: as many as the
  // accounts read, however many checks they wrote.
  const names = new Map<string, string>();
  for (const did of new Set([...shown.map((c) => c.runner), ...rules.map((r) => r.by)]))
    names.set(did, (await readers.resolve(did)).handle ?? did);
  const cut = othersWhole
    ? []
    : others.flatMap((a, i) =>
        read[i]!.complete ? [] : [{ runner: a.did, name: a.handle ?? a.did, read: read[i]!.read }],
      );
  return {
    protection,
    rules,
    required: requiredOf(rules),
    shown,
    unmet: unmetChecks(rules, shown, owner.did, names),
    names,
    cut,
  };
}
