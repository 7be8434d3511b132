// Checks and protection records on the PDSes: a runner's check written in its own account, a
// repository's protection read from and written in its owner's, checks read from the accounts that
// can count. The parsers are handed in (forge/read.ts, with the lexicons each front end bundles).
import type { Identity } from '../identity/resolver.ts';
import {
  branchProtection,
  commitChecks,
  repoProtection,
  trustedRunners,
  unmetChecks,
  type ListedCheck,
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

/** The protection that counts for the owner's repository `name`: only the owner's own record. */
export async function readProtection(
  store: ForgeStore,
  owner: Pick<Identity, 'did' | 'pds'>,
  name: string,
  read: (value: unknown) => Promise<ProtectionRecord>,
): Promise<{ record: ProtectionRecord | undefined; cid: string | undefined }> {
  const got = await store.get(owner, PROTECTION, name, read);
  const record = repoProtection(
    got === undefined ? undefined : { did: got.did, rkey: got.rkey, record: got.value },
    repoUri(owner.did, name),
  );
  return { record, cid: got?.cid };
}

/**
 * Sets (or, with `branch` undefined as protection, removes) one branch's protection in the
 * session's repository `name`, with compare-and-swap on the record as read; the record is deleted
 * when no branch is left. Returns the repository's protection as written.
 */
export async function writeBranchProtection(
  store: ForgeStore,
  auth: Auth,
  name: string,
  read: (value: unknown) => Promise<ProtectionRecord>,
  branch: string,
  protection: BranchProtection | undefined,
): Promise<ProtectionRecord | undefined> {
  const owner = { did: auth.session.did, pds: auth.session.pds };
  const raw = await store.getRaw(owner, PROTECTION, name);
  const current = await readProtection(store, owner, name, read);
  const others = (current.record?.branches ?? []).filter((b) => b.branch !== branch);
  const branches = protection === undefined ? others : [...others, protection];
  branches.sort((a, b) => (a.branch < b.branch ? -1 : a.branch > b.branch ? 1 : 0));
  if (branches.length === 0) {
    if (raw !== undefined) await store.delete(auth, PROTECTION, name);
    return undefined;
  }
  const record: ProtectionRecord = {
    repo: repoUri(owner.did, name),
    branches,
    createdAt: new Date().toISOString(),
  };
  const json = writeRecord(PROTECTION, record);
  await checkToWrite(read, json, 'protection');
  if (raw === undefined) await store.create(auth, PROTECTION, json, name);
  else await store.put(auth, PROTECTION, name, json, raw.cid);
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

/** What a commit's checks come to for a branch (or for every protected branch when none is named). */
export interface CommitVerdict {
  protection: ProtectionRecord | undefined;
  branch: BranchProtection | undefined;
  shown: ShownCheck[];
  unmet: UnmetCheck[];
  /** Each shown runner's name: its verified handle, else its DID. */
  names: Map<string, string>;
}

/** How a front end reads what a verdict needs: accounts resolved, records checked (forge/read.ts). */
export interface VerdictReaders {
  resolve: (did: string) => Promise<{ did: string; pds: string; handle?: string | undefined }>;
  check: (value: unknown) => Promise<CheckRecord>;
  protection: (value: unknown) => Promise<ProtectionRecord>;
}

/**
 * The checks of `commit` in the owner's repository `name`, as `branch`'s protection judges them
 * (with no branch, a runner any protected branch trusts is marked trusted), read from the PDSes:
 * only the accounts that can count are read (the owner's and the runners the protection trusts),
 * and `extra` beside them, so that their checks are shown, named and untrusted. The CLI's merge
 * and the appview's merge button both decide with this.
 */
export async function commitVerdict(
  store: ForgeStore,
  readers: VerdictReaders,
  owner: Pick<Identity, 'did' | 'pds'>,
  name: string,
  commit: string,
  branch: string | undefined,
  extra: readonly Pick<Identity, 'did' | 'pds'>[],
): Promise<CommitVerdict> {
  const { record: protection } = await readProtection(store, owner, name, readers.protection);
  const rules = branch === undefined ? undefined : branchProtection(protection, branch);
  const trusted = trustedRunners(protection, branch);
  const runners = await Promise.all(trusted.map((did) => readers.resolve(did)));
  const checks = await readChecks(store, [owner, ...runners, ...extra], readers.check);
  const shown = commitChecks(checks, repoUri(owner.did, name), commit, trusted);
  const names = new Map<string, string>();
  for (const did of new Set(shown.map((c) => c.runner)))
    names.set(did, (await readers.resolve(did)).handle ?? did);
  return { protection, branch: rules, shown, unmet: unmetChecks(rules, shown, names), names };
}
