import { activeSession } from '../../auth/login.ts';
import { KnotlessError } from 'knotless-core/errors';
import { branchRules, type BranchRule, type RepoProtection } from 'knotless-core/forge/checks';
import { readRepoProtection, requiredOf, writeBranchProtection } from 'knotless-core/forge/checks-store';
import { readMaintainers } from 'knotless-core/records/maintainers';
import { parseRepoSpec } from 'knotless-core/records/name';
import type { RemoteRepo } from 'knotless-core/records/remote-repo';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import type { Context } from '../../context.ts';
import { runnerName } from '../../forge/checks.ts';
import { isValidBranch, parseProtection, type BranchProtection } from '../../forge/records.ts';
import { JSON_OPTION, type Command } from '../command.ts';
import { forgeReader } from '../forge-shared.ts';
import type { Io } from '../io.ts';
import { ownerOf } from './owner.ts';

export const command: Command = {
  name: 'repo protect',
  args: '<[handle/]repo> [<branch>]',
  summary:
    'protect a branch: the checks a merge into it waits for, whose checks count, force-pushes and deletion',
  details: [
    "The protection is a record in your account: the owner's, or a maintainer's of the owner's repository (`knotless repo maintainer`; nobody else's protects anything). It replaces your earlier protection of the branch whole: name every required check and trusted runner each time. The owner's checks and your own always count for what you require; --runner adds an account whose checks count too.",
    "Every account's requirements hold together: a merge waits for each, each counting only the runners its writer trusts, and a push may rewrite or delete the branch only when every protection of it allows that. --show prints the repository's protection (of every branch with no branch named) and who set each requirement; --remove lifts your protection of the branch.",
  ],
  options: {
    'require-check': {
      type: 'string',
      multiple: true,
      value: 'NAME',
      help: 'a check context a merge waits for',
    },
    runner: { type: 'string', multiple: true, value: 'HANDLE', help: 'an account whose checks count' },
    'allow-force-push': { type: 'boolean', help: 'let a push rewrite the branch' },
    'allow-deletion': { type: 'boolean', help: 'let a push delete the branch' },
    show: { type: 'boolean', help: 'print the protection instead of setting it' },
    remove: { type: 'boolean', help: 'lift your protection of the branch' },
    json: JSON_OPTION,
  },
  examples: [
    'knotless repo protect site main --require-check test --runner ci.example.com',
    'knotless repo protect alice.example/site main --require-check lint',
    'knotless repo protect alice.example/site --show',
  ],
  positionals: { min: 1, max: 2 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const specText = args.positionals[0]!;
    const branch = args.positionals[1]?.replace(/^refs\/heads\//, '');
    if (branch !== undefined && !isValidBranch(branch))
      throw new KnotlessError('usage', `${safeText(args.positionals[1]!)} is not a branch name.`);
    const json = args.values['json'] === true;
    const spec = parseRepoSpec(specText);
    const warn = (m: string) => io.err(`knotless: warning: ${m}`);
    if (args.values['show'] === true) {
      const owner = await ownerOf(c, spec.owner);
      const remote = c.remoteRepo(owner, spec.name, warn);
      const read = await readMaintainers(remote);
      const maintainers = read?.maintainers.map((m) => m.did) ?? [];
      await show(c, io, remote, await effective(c, io, remote, maintainers), branch, json);
      return;
    }
    if (branch === undefined) throw new KnotlessError('usage', 'Name the branch to protect (or use --show).');
    const auth = await activeSession(c);
    const owner = spec.owner === undefined ? { ...auth.session } : await c.resolver.resolve(spec.owner);
    const remote = c.remoteRepo(owner, spec.name, warn);
    // Who may protect: the owner, and the maintainers the owner's ref table lists now, each in
    // their own record; anyone else is refused before anything is written.
    const read = await readMaintainers(remote);
    const maintainers = read?.maintainers.map((m) => m.did) ?? [];
    if (owner.did !== auth.session.did && !maintainers.includes(auth.session.did)) {
      if (read === undefined && !(await remote.exists()))
        throw new KnotlessError('repo-missing', `${remote.label} does not exist; check the name.`);
      throw new KnotlessError(
        'permission-denied',
        `Only ${safeText(owner.handle ?? owner.did)} and the maintainers it lists can protect branches of ${safeText(spec.name)}; you are ${safeText(auth.session.handle)}.`,
      );
    }
    if (read === undefined && !(await remote.exists()))
      throw new KnotlessError('repo-missing', `${remote.label} does not exist; check the name.`);
    let rules: BranchProtection | undefined;
    if (args.values['remove'] !== true) {
      const runners = await Promise.all(
        ((args.values['runner'] as string[] | undefined) ?? []).map((h) => c.resolver.resolve(h)),
      );
      rules = {
        branch,
        requiredChecks: [...new Set((args.values['require-check'] as string[] | undefined) ?? [])],
        trustedRunners: [...new Set(runners.map((r) => r.did))],
        allowForcePush: args.values['allow-force-push'] === true,
        allowDeletion: args.values['allow-deletion'] === true,
      };
    }
    const store = forgeReader(c, io).store;
    await writeBranchProtection(store, auth, owner.did, remote.name, parseProtection, branch, rules);
    const yours = owner.did === auth.session.did ? '' : ' by you';
    io.err(
      rules === undefined
        ? `${remote.label}: ${safeText(branch)} is no longer protected${yours}.`
        : `${remote.label}: ${safeText(branch)} is protected${yours}.`,
    );
    await show(c, io, remote, await effective(c, io, remote, maintainers), branch, json);
  },
};

/** The repository's protection as every reader takes it (knotless-core's rule). */
function effective(
  c: Context,
  io: Io,
  remote: RemoteRepo,
  maintainers: readonly string[],
): Promise<RepoProtection> {
  return readRepoProtection(
    forgeReader(c, io).store,
    remote.owner,
    remote.name,
    parseProtection,
    maintainers,
    (did) => c.resolver.resolve(did),
    (m) => io.err(`knotless: warning: ${m}`),
  );
}

/** One branch's protection as printed and listed: what holds, and each account's rule of it. */
interface BranchView {
  branch: string;
  /** Every context some rule requires. */
  requiredChecks: string[];
  /** Every runner some rule trusts by name (each counts only for its own rule's requirements). */
  trustedRunners: string[];
  /** Whether every rule allows it. */
  allowForcePush: boolean;
  allowDeletion: boolean;
  rules: (BranchProtection & { by: string; name: string; owner: boolean })[];
}

/** Prints `protection`'s branches (only `branch` when named), as text or `{repo, branches}`. */
async function show(
  c: Context,
  io: Io,
  remote: RemoteRepo,
  protection: RepoProtection,
  branch: string | undefined,
  json: boolean,
): Promise<void> {
  const label = remote.label;
  const names = new Map<string, string>();
  const name = async (did: string) => {
    if (!names.has(did)) names.set(did, await runnerName(c, did));
    return names.get(did)!;
  };
  const branches = [
    ...new Set(protection.records.flatMap((r) => r.record.branches.map((b) => b.branch))),
  ].filter((b) => branch === undefined || b === branch);
  const views: BranchView[] = [];
  for (const b of branches) {
    const rules: BranchRule[] = branchRules(protection, b);
    views.push({
      branch: b,
      requiredChecks: requiredOf(rules) ?? [],
      trustedRunners: [...new Set(rules.flatMap((r) => r.trustedRunners))],
      allowForcePush: rules.every((r) => r.allowForcePush),
      allowDeletion: rules.every((r) => r.allowDeletion),
      rules: await Promise.all(
        rules.map(async (r) => ({
          branch: r.branch,
          requiredChecks: r.requiredChecks,
          trustedRunners: r.trustedRunners,
          allowForcePush: r.allowForcePush,
          allowDeletion: r.allowDeletion,
          by: r.by,
          name: await name(r.by),
          owner: r.by === protection.owner,
        })),
      ),
    });
  }
  if (json) {
    io.out(safeJson({ repo: label, branches: views }));
    return;
  }
  if (views.length === 0)
    io.out(`${label}: no protected branch${branch === undefined ? '' : ` ${safeText(branch)}`}`);
  const allowed = (yes: boolean) => (yes ? 'allowed' : 'refused');
  const checks = (list: string[]) => list.map((x) => safeText(x, 100)).join(', ') || 'none';
  for (const v of views) {
    // Whose checks count: the owner's always, a maintainer's own for what they require, and the
    // runners each names, for that rule alone.
    const runners = async (r: BranchView['rules'][number]) =>
      [
        'the owner',
        ...(await Promise.all([...(r.owner ? [] : [r.by]), ...r.trustedRunners].map(name))).map((n) =>
          safeText(n),
        ),
      ].join(', ');
    io.out(`${label} ${safeText(v.branch)}`);
    io.out(`  required checks: ${checks(v.requiredChecks)}`);
    io.out(
      `  trusted runners: ${
        v.rules.length === 1 ? await runners(v.rules[0]!) : "each requirement's own, below"
      }`,
    );
    io.out(`  force-push: ${allowed(v.allowForcePush)}; deletion: ${allowed(v.allowDeletion)}`);
    if (v.rules.length === 1 && v.rules[0]!.owner) continue;
    for (const r of v.rules)
      io.out(
        `  set by ${safeText(r.name)} (${r.owner ? 'the owner' : 'a maintainer'}): requires ${checks(r.requiredChecks)}; counts checks by ${await runners(r)}; force-push ${allowed(r.allowForcePush)}; deletion ${allowed(r.allowDeletion)}`,
      );
  }
}
