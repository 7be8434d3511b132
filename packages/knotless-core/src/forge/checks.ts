// Checks and branch protection, the rules in one place for the CLI, the helper and the appview:
// which check records a commit shows, whose protection counts, and whether a commit satisfies a
// branch's protection or a push may rewrite or delete it. Everything here is pure: the callers read
// the records (each with the DID of the account it is in and its record key) and hand them in.
import type { ProtectedReason } from '../errors.ts';
import { refTableKey } from '../records/ref-table.ts';
import { safeText } from '../text/terminal.ts';
import {
  parseAtUri,
  type BranchProtection,
  type CheckRecord,
  type CheckState,
  type ProtectionRecord,
} from './records.ts';

/** A check record as read: the account it is in (its runner) and its record key. */
export interface ListedCheck {
  runner: string;
  rkey: string;
  record: CheckRecord;
}

/** One runner's verdict on one context of a commit, as shown. */
export interface ShownCheck {
  context: string;
  runner: string;
  state: CheckState;
  targetUrl?: string;
  description?: string;
  /** The record key of the record that gave this verdict. */
  rkey: string;
  /** Whether the runner's checks count for the branch's protection (the owner's always do). */
  trusted: boolean;
}

/**
 * A commit's checks as shown: for each context, each runner's latest verdict on `commit` of `repo`,
 * latest by record key (TIDs, in the order the runner wrote them; `createdAt` is never read, and one
 * runner's keys are only ever ordered against its own). `trusted` are the runners that count (the
 * repository's owner always does); the others are shown and named, not hidden. Sorted by context,
 * then trusted runners first, then by runner.
 */
export function commitChecks(
  checks: readonly ListedCheck[],
  repo: string,
  commit: string,
  trusted: readonly string[],
): ShownCheck[] {
  const owner = parseAtUri(repo)?.did;
  const of = checks.filter((c) => c.record.repo === repo && c.record.commit === commit);
  const shown = latestVerdicts(of).map((c): ShownCheck => {
    const r = c.record;
    return {
      context: r.context,
      runner: c.runner,
      state: r.state,
      ...(r.targetUrl === undefined ? {} : { targetUrl: r.targetUrl }),
      ...(r.description === undefined ? {} : { description: r.description }),
      rkey: c.rkey,
      trusted: c.runner === owner || trusted.includes(c.runner),
    };
  });
  return shown.sort(
    (a, b) => cmp(a.context, b.context) || Number(b.trusted) - Number(a.trusted) || cmp(a.runner, b.runner),
  );
}

/**
 * How many verdicts by runners that do not count are shown of one commit, at most, by the CLI's
 * `check list` and the appview's pages alike: anyone can write checks on any commit, and a flood of
 * them must neither hide the verdicts that count nor make the listing unbounded. Trusted runners'
 * verdicts (the owner's included) are always shown in full.
 */
export const UNTRUSTED_SHOWN = 50;

/**
 * How many verdicts by runners that do not count, past those shown, an index counts at most to say
 * how many it left out: past that it says "at least", so a flood costs a bounded count too.
 */
export const UNTRUSTED_COUNTED = 1000;

/**
 * The words for the verdicts by runners that do not count left out of a listing, the same on the
 * CLI and the pages: "and 70 more by runners the owner does not trust" (`atLeast` when the count is
 * a lower bound: an account read in part, or a count cut at {@link UNTRUSTED_COUNTED}).
 */
export function moreUntrusted(count: number, atLeast: boolean): string {
  return `and ${atLeast ? 'at least ' : ''}${count} more by runners the owner does not trust`;
}

/**
 * `shown` (commitChecks's order) with at most `limit` verdicts by untrusted runners kept, the first
 * in that order, and how many were left out.
 */
export function capUntrusted(
  shown: readonly ShownCheck[],
  limit: number = UNTRUSTED_SHOWN,
): { shown: ShownCheck[]; more: number } {
  let others = 0;
  const kept = shown.filter((c) => c.trusted || ++others <= limit);
  return { shown: kept, more: shown.length - kept.length };
}

/**
 * The checks that are verdicts: of each runner's checks on one context of one commit of one
 * repository, the latest by record key (TIDs, in the order the runner wrote them; `createdAt` is
 * never read, and one runner's keys are only ever ordered against its own). The others are
 * replaced, and an index need not keep them.
 */
export function latestVerdicts(checks: readonly ListedCheck[]): ListedCheck[] {
  const latest = new Map<string, ListedCheck>();
  for (const c of checks) {
    const key = JSON.stringify([c.runner, c.record.repo, c.record.commit, c.record.context]);
    const seen = latest.get(key);
    if (seen === undefined || c.rkey > seen.rkey) latest.set(key, c);
  }
  return [...latest.values()];
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A protection record as read: the account it is in and its record key. */
export interface ListedProtection {
  did: string;
  rkey: string;
  record: ProtectionRecord;
}

/** One account's protection of one branch: `by` is the account whose record says it. */
export interface BranchRule extends BranchProtection {
  by: string;
}

/**
 * A repository's protection as it counts: the records of its team (the owner's first, then each
 * maintainer's in the owner's order) that are keyed and name the repository as they must. Empty
 * when nobody protects anything.
 */
export interface RepoProtection {
  /** The repository's `dev.knotless.repo` record. */
  repo: string;
  /** The owner's DID, whose checks count for every requirement. */
  owner: string;
  records: { by: string; record: ProtectionRecord }[];
}

/**
 * The key of `writer`'s protection record of `owner`'s repository `name`: the repository's name in
 * the owner's account; in a maintainer's, the key their ref table of it has
 * (records/ref-table.ts), so that it never collides with a repository of their own of that name.
 */
export function protectionKey(name: string, owner: string, writer: string): string {
  return refTableKey(name, owner, writer);
}

/**
 * The protection that counts for `repo`: the owner's record (keyed by the repository's name) and the
 * records of the maintainers the owner lists now (`maintainers`, each keyed by
 * {@link protectionKey}), each naming exactly the repository. Authority comes from whose account a
 * record is in: a record of that shape in any other account, or a maintainer's once they are no
 * longer listed, protects nothing. A record under its key that names another repository is
 * skipped whole, said once through `warn`.
 */
export function repoProtection(
  listed: readonly ListedProtection[],
  repo: string,
  maintainers: readonly string[],
  warn: (message: string) => void = () => {},
): RepoProtection {
  const r = parseAtUri(repo);
  const out: RepoProtection = { repo, owner: r?.did ?? '', records: [] };
  if (r === undefined) return out;
  const team = [r.did, ...maintainers.filter((m) => m !== r.did)];
  for (const did of new Set(team)) {
    const key = protectionKey(r.rkey, r.did, did);
    const got = listed.find((l) => l.did === did && l.rkey === key);
    if (got === undefined) continue;
    if (got.record.repo !== repo) {
      warn(
        // Which repository it names is the writer's word, and is not repeated to a terminal or page.
        `the dev.knotless.protection record ${safeText(key, 200)} of ${safeText(did)} names another repository, so it protects nothing of ${safeText(repo, 200)}`,
      );
      continue;
    }
    out.records.push({ by: did, record: got.record });
  }
  return out;
}

/**
 * `branch`'s protection: each counting record's rule for it, with whose record it is (the owner's
 * first). Empty when the branch is not protected.
 */
export function branchRules(protection: RepoProtection | undefined, branch: string): BranchRule[] {
  return (protection?.records ?? []).flatMap(({ by, record }) => {
    const b = record.branches.find((x) => x.branch === branch);
    return b === undefined ? [] : [{ ...b, by }];
  });
}

/** The accounts whose checks count for `rule` besides the owner's: its writer and the runners it trusts. */
function ruleRunners(rule: BranchRule, owner: string): Set<string> {
  return new Set([owner, rule.by, ...rule.trustedRunners]);
}

/**
 * The runners whose checks count for some requirement of `branch` (besides the owner, whose always
 * do): each record's writer and the runners it trusts there; with no branch named, those of any
 * protected branch. What a reader reads whole and marks trusted.
 */
export function trustedRunners(protection: RepoProtection | undefined, branch: string | undefined): string[] {
  const owner = protection?.owner;
  const rules =
    branch !== undefined
      ? branchRules(protection, branch)
      : (protection?.records ?? []).flatMap(({ by, record }) => record.branches.map((b) => ({ ...b, by })));
  const out = new Set<string>();
  for (const rule of rules) for (const d of ruleRunners(rule, owner ?? '')) if (d !== owner) out.add(d);
  return [...out];
}

/** Why a required check does not let a merge through yet. */
export type UnmetKind = 'missing' | 'pending' | 'failing' | 'untrusted';

export interface UnmetCheck {
  context: string;
  kind: UnmetKind;
  /** One line: the context and why, runners named by their names in `names`, else by DID. */
  reason: string;
  /** The accounts whose requirement this is (DIDs), the owner's first. */
  by: string[];
}

/**
 * The requirements of `rules` (one branch's, from {@link branchRules}) that `shown` (a commit's
 * checks, from commitChecks) does not satisfy, each with its reason; empty when the merge may go.
 * Every account's requirement must hold on its own: a context account X requires is satisfied by a
 * success from the owner, from X, or from a runner X trusts, when none of those runners' latest
 * verdicts on it is a failure or an error (a counted failure outweighs any success). So each
 * requirement keeps its own runners, and nobody's trust makes another account's requirement
 * easier; checks by runners no requirement trusts never count, whatever they claim. Requirements
 * unmet in the same way are said once, naming everyone who required them; a reason names who
 * required it unless that is the owner alone. `names` are the accounts' names to show (handles).
 */
export function unmetChecks(
  rules: readonly BranchRule[],
  shown: readonly ShownCheck[],
  owner: string,
  names: ReadonlyMap<string, string> = new Map(),
): UnmetCheck[] {
  const name = (did: string) => safeText(names.get(did) ?? did);
  const by = (list: ShownCheck[]) => list.map((c) => name(c.runner)).join(', ');
  const found: { context: string; kind: UnmetKind; detail: string; by: string[] }[] = [];
  for (const rule of rules) {
    const runners = ruleRunners(rule, owner);
    for (const context of rule.requiredChecks) {
      const all = shown.filter((c) => c.context === context);
      const counted = all.filter((c) => runners.has(c.runner));
      const failing = counted.filter((c) => c.state === 'failure' || c.state === 'error');
      const pending = counted.filter((c) => c.state === 'pending');
      let kind: UnmetKind;
      let detail: string;
      if (failing.length > 0) {
        kind = 'failing';
        detail = `failing (${failing[0]!.state} by ${by(failing)})`;
      } else if (counted.some((c) => c.state === 'success')) continue;
      else if (pending.length > 0) {
        kind = 'pending';
        detail = `pending (by ${by(pending)})`;
      } else if (all.length > 0) {
        kind = 'untrusted';
        detail = `only checked by runners the owner does not trust (${by(all)})`;
        if (rule.by !== owner)
          detail = `only checked by runners ${name(rule.by)} does not trust (${by(all)})`;
      } else {
        kind = 'missing';
        detail = 'no check by a trusted runner yet';
      }
      const same = found.find((f) => f.context === context && f.kind === kind && f.detail === detail);
      if (same === undefined) found.push({ context, kind, detail, by: [rule.by] });
      else if (!same.by.includes(rule.by)) same.by.push(rule.by);
    }
  }
  return found.map((f) => ({
    context: f.context,
    kind: f.kind,
    reason: `${safeText(f.context, 100)}: ${f.detail}${
      f.by.length === 1 && f.by[0] === owner ? '' : ` (required by ${f.by.map(name).join(', ')})`
    }`,
    by: f.by,
  }));
}

/**
 * Why `me` may not merge past the required checks still `unmet` (`ignore`: they asked to), in one
 * sentence; undefined when they may, or did not ask, or nothing is unmet. Merging past them is the
 * owner's alone, whoever required them: a maintainer merges as the owner does in every other way,
 * but no account loosens what another required (format.md, "Teams").
 */
export function pastChecksRefusal(
  owner: { did: string; name: string },
  me: string,
  unmet: readonly unknown[],
  ignore: boolean,
): string | undefined {
  if (!ignore || unmet.length === 0 || me === owner.did) return undefined;
  const who = safeText(owner.name);
  return `Merging past required checks is ${who}'s alone, whoever required them; nothing was merged: wait for the checks to pass, or ask ${who} to merge.`;
}

/**
 * The one sentence refusing a merge of pull request `id` into `base` while `head`'s required checks
 * are `unmet`, naming each and why; `override` says how the front end merges anyway (the CLI's
 * option, the web's button).
 */
export function unmetSentence(
  id: string,
  base: string,
  head: string,
  unmet: readonly UnmetCheck[],
  override: string,
): string {
  return `${safeText(id)} waits for the required checks of ${safeText(base)} on ${head.slice(0, 12)}: ${unmet.map((u) => u.reason).join('; ')}; nothing was merged (${override} merges anyway, and says so on the pull request).`;
}

/**
 * What a merge that overrides the protection records in the pull request's merged status: each
 * unmet check's reason, cut to the lexicon's 300 bytes a line.
 */
export function ignoredChecks(unmet: readonly UnmetCheck[]): string[] {
  return unmet.map((u) => fitBytes(u.reason, 300));
}

/** `text` cut to at most `max` bytes of UTF-8, never inside a character. */
function fitBytes(text: string, max: number): string {
  let out = text;
  while (new TextEncoder().encode(out).length > max) out = [...out].slice(0, -1).join('');
  return out;
}

/** What a push does to a branch, as the protection sees it. */
export type BranchUpdate = 'fast-forward' | 'force' | 'delete';

/** A push refused by a branch's protection: the rule's words, and whose records refuse it (DIDs). */
export interface PushRefused {
  reason: ProtectedReason;
  by: string[];
}

/**
 * Why a push may not make `update` to a protected branch, or undefined when it may: a protected
 * branch is neither rewritten nor deleted unless every record protecting it (`rules`, one branch's
 * from {@link branchRules}) allows it, so any one account's refusal binds everyone's pushes, the
 * owner's too, and nobody's allowance loosens what another refused.
 */
export function pushRefusal(rules: readonly BranchRule[], update: BranchUpdate): PushRefused | undefined {
  if (update === 'fast-forward') return undefined;
  const refusing = rules.filter((r) => (update === 'force' ? !r.allowForcePush : !r.allowDeletion));
  if (refusing.length === 0) return undefined;
  return {
    reason:
      update === 'force'
        ? 'protected branch: force-push not allowed'
        : 'protected branch: deletion not allowed',
    by: refusing.map((r) => r.by),
  };
}
