// Checks and branch protection, the rules in one place for the CLI, the helper and the appview:
// which check records a commit shows, whose protection counts, and whether a commit satisfies a
// branch's protection or a push may rewrite or delete it. Everything here is pure: the callers read
// the records (each with the DID of the account it is in and its record key) and hand them in.
import type { ProtectedReason } from '../errors.ts';
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

/**
 * The protection that counts for `repo`: a protection record counts only when it is in the
 * repository owner's account, keyed by the repository's name, and names the repository. Anyone can
 * write a record of that shape in their own account; only the owner's protects anything.
 */
export function repoProtection(
  listed: { did: string; rkey: string; record: ProtectionRecord } | undefined,
  repo: string,
): ProtectionRecord | undefined {
  const r = parseAtUri(repo);
  if (listed === undefined || r === undefined) return undefined;
  if (listed.did !== r.did || listed.rkey !== r.rkey || listed.record.repo !== repo) return undefined;
  return listed.record;
}

/** `branch`'s protection in the repository's protection, when it has one. */
export function branchProtection(
  protection: ProtectionRecord | undefined,
  branch: string,
): BranchProtection | undefined {
  return protection?.branches.find((b) => b.branch === branch);
}

/**
 * The runners whose checks count for `branch` of a repository with `protection` (besides the
 * owner, whose always do); with no branch named, those any protected branch trusts.
 */
export function trustedRunners(
  protection: ProtectionRecord | undefined,
  branch: string | undefined,
): string[] {
  if (branch !== undefined) return branchProtection(protection, branch)?.trustedRunners ?? [];
  return [...new Set((protection?.branches ?? []).flatMap((b) => b.trustedRunners))];
}

/** Why a required check does not let a merge through yet. */
export type UnmetKind = 'missing' | 'pending' | 'failing' | 'untrusted';

export interface UnmetCheck {
  context: string;
  kind: UnmetKind;
  /** One line: the context and why, runners named by their names in `names`, else by DID. */
  reason: string;
}

/**
 * The branch's required checks `shown` (a commit's checks, from commitChecks with the branch's
 * trusted runners) does not satisfy, each with its reason; empty when the merge may go. A required
 * context is satisfied by a trusted runner's success when no trusted runner's latest verdict on it
 * is a failure or an error; a trusted failure outweighs any success, and checks by untrusted
 * runners never count, whatever they claim. `names` are the runners' names to show (handles).
 */
export function unmetChecks(
  protection: BranchProtection | undefined,
  shown: readonly ShownCheck[],
  names: ReadonlyMap<string, string> = new Map(),
): UnmetCheck[] {
  if (protection === undefined) return [];
  const unmet: UnmetCheck[] = [];
  for (const context of protection.requiredChecks) {
    const all = shown.filter((c) => c.context === context);
    const counted = all.filter((c) => c.trusted);
    const name = safeText(context, 100);
    const by = (list: ShownCheck[]) => list.map((c) => safeText(names.get(c.runner) ?? c.runner)).join(', ');
    const failing = counted.filter((c) => c.state === 'failure' || c.state === 'error');
    if (failing.length > 0) {
      unmet.push({
        context,
        kind: 'failing',
        reason: `${name}: failing (${failing[0]!.state} by ${by(failing)})`,
      });
      continue;
    }
    if (counted.some((c) => c.state === 'success')) continue;
    const pending = counted.filter((c) => c.state === 'pending');
    if (pending.length > 0) {
      unmet.push({ context, kind: 'pending', reason: `${name}: pending (by ${by(pending)})` });
      continue;
    }
    if (all.length > 0) {
      unmet.push({
        context,
        kind: 'untrusted',
        reason: `${name}: only checked by runners the owner does not trust (${by(all)})`,
      });
      continue;
    }
    unmet.push({ context, kind: 'missing', reason: `${name}: no check by a trusted runner yet` });
  }
  return unmet;
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

/**
 * Why a push may not make `update` to a protected branch (one line), or undefined when it may: a
 * protected branch is neither rewritten nor deleted unless its protection allows it.
 */
export function pushRefusal(
  protection: BranchProtection | undefined,
  update: BranchUpdate,
): ProtectedReason | undefined {
  if (protection === undefined || update === 'fast-forward') return undefined;
  if (update === 'force' && !protection.allowForcePush) return 'protected branch: force-push not allowed';
  if (update === 'delete' && !protection.allowDeletion) return 'protected branch: deletion not allowed';
  return undefined;
}
