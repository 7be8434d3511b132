import { KnotlessError } from 'knotless-core/errors';
import { readProtection, writeBranchProtection } from 'knotless-core/forge/checks-store';
import { parseRepoSpec } from 'knotless-core/records/name';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { runnerName } from '../../forge/checks.ts';
import { isValidBranch, parseProtection, type BranchProtection } from '../../forge/records.ts';
import { JSON_OPTION, type Command } from '../command.ts';
import { forgeReader } from '../forge-shared.ts';
import { ownRepo, ownerOf } from './owner.ts';

export const command: Command = {
  name: 'repo protect',
  args: '<[handle/]repo> [<branch>]',
  summary:
    'protect a branch: the checks a merge into it waits for, whose checks count, force-pushes and deletion',
  details: [
    "The protection is a record in your account (the owner's: nobody else's protects anything). It replaces the branch's earlier protection whole: name every required check and trusted runner each time. Your own checks always count; --runner adds an account whose checks count too.",
    "A protected branch is never force-pushed or deleted unless --allow-force-push or --allow-deletion says it may be. --show prints the protection (of every branch with no branch named); --remove lifts the branch's.",
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
    remove: { type: 'boolean', help: "lift the branch's protection" },
    json: JSON_OPTION,
  },
  examples: [
    'knotless repo protect site main --require-check test --runner ci.example.com',
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
    const store = forgeReader(c, io).store;
    const show = async (list: BranchProtection[], label: string) => {
      if (json) {
        io.out(safeJson({ repo: label, branches: list }));
        return;
      }
      if (list.length === 0)
        io.out(`${label}: no protected branch${branch === undefined ? '' : ` ${safeText(branch)}`}`);
      for (const b of list) {
        const runners = await Promise.all(
          b.trustedRunners.map(async (d) => safeText(await runnerName(c, d))),
        );
        io.out(`${label} ${safeText(b.branch)}`);
        io.out(`  required checks: ${b.requiredChecks.map((x) => safeText(x, 100)).join(', ') || 'none'}`);
        io.out(`  trusted runners: the owner${runners.map((r) => `, ${r}`).join('')}`);
        io.out(
          `  force-push: ${b.allowForcePush ? 'allowed' : 'refused'}; deletion: ${b.allowDeletion ? 'allowed' : 'refused'}`,
        );
      }
    };
    if (args.values['show'] === true) {
      const spec = parseRepoSpec(specText);
      const owner = await ownerOf(c, spec.owner);
      const { record } = await readProtection(store, owner, spec.name, parseProtection);
      const label = `${safeText(owner.handle ?? owner.did)}/${safeText(spec.name)}`;
      await show(
        (record?.branches ?? []).filter((b) => branch === undefined || b.branch === branch),
        label,
      );
      return;
    }
    if (branch === undefined) throw new KnotlessError('usage', 'Name the branch to protect (or use --show).');
    const { auth, remote } = await ownRepo(c, specText, 'protect branches of', io);
    if (!(await remote.exists()))
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
    await writeBranchProtection(store, auth, remote.name, parseProtection, branch, rules);
    io.err(
      rules === undefined
        ? `${remote.label}: ${safeText(branch)} is no longer protected.`
        : `${remote.label}: ${safeText(branch)} is protected.`,
    );
    await show(rules === undefined ? [] : [rules], remote.label);
  },
};
