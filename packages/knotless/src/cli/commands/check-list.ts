import { KnotlessError } from 'knotless-core/errors';
import { capUntrusted, moreUntrusted, UNTRUSTED_SHOWN } from 'knotless-core/forge/checks';
import { OTHERS_READ } from 'knotless-core/forge/checks-store';
import { isValidBranch } from 'knotless-core/forge/records';
import { readRepoRefs } from 'knotless-core/records/read-refs';
import { refsByName } from 'knotless-core/records/remote-repo';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { commitVerdict } from '../../forge/checks.ts';
import { JSON_OPTION, type Command } from '../command.ts';
import { currentDid, forgeReader, targetOf } from '../forge-shared.ts';

export const command: Command = {
  name: 'check list',
  args: '<[handle/]repo> <commit-or-branch>',
  summary: "a commit's checks: each runner's latest verdict per context, trusted runners marked",
  details: [
    `Checks are read from the accounts that can count (the owner's, and those of the maintainers whose protection requires checks and of the runners each protection trusts) and yours; --runner reads another's too, shown untrusted unless some protection trusts it. The owner's and trusted runners' verdicts are all listed; of the others at most ${UNTRUSTED_SHOWN}, with a line saying how many more (--all lists every one). Of an account that does not count only the newest check records are read, as far as that listing needs (at most ${OTHERS_READ}), and a line says so; --all reads them all. Given a branch, its head commit is listed and judged by that branch's protection: what a merge into it still waits for is listed last. Given a commit, a runner any protected branch trusts is marked trusted.`,
  ],
  options: {
    runner: { type: 'string', multiple: true, value: 'HANDLE', help: "read this runner's checks too" },
    all: {
      type: 'boolean',
      help: 'list every untrusted verdict too, not only the first ' + String(UNTRUSTED_SHOWN),
    },
    json: JSON_OPTION,
  },
  examples: ['knotless check list alice.example/site main', 'knotless check list site 0123…cdef --json'],
  positionals: { min: 2, max: 2 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const target = await targetOf(c, args.positionals[0]!);
    const what = args.positionals[1]!;
    let commit: string;
    let branch: string | undefined;
    if (/^[0-9a-fA-F]{40}$/.test(what)) commit = what.toLowerCase();
    else {
      branch = what.replace(/^refs\/heads\//, '');
      if (!isValidBranch(branch))
        throw new KnotlessError(
          'usage',
          `${safeText(what)} is neither a 40-hex commit id nor a branch name.`,
        );
      const remote = c.remoteRepo(target.owner, target.name, (m) => io.err(`knotless: warning: ${m}`));
      // The branch whatever the repository's layout (its ref table, or its ref records), as every
      // reader takes it: a branch two records claim is none.
      const ref = refsByName(await readRepoRefs(remote)).byName.get(`refs/heads/${branch}`);
      if (ref?.record.target === undefined)
        throw new KnotlessError('not-found', `${target.label} has no branch ${safeText(branch)}.`);
      commit = ref.record.target;
    }
    const me = await currentDid(c);
    const named = (args.values['runner'] as string[] | undefined) ?? [];
    const extra = await Promise.all(
      [...named, ...(me === undefined ? [] : [me])].map((h) => c.resolver.resolve(h)),
    );
    const r = forgeReader(c, io);
    const all = args.values['all'] === true;
    const v = await commitVerdict(r, target.owner, target.name, commit, branch, extra, all);
    const name = (did: string) => v.names.get(did) ?? did;
    const { shown, more } = all ? { shown: v.shown, more: 0 } : capUntrusted(v.shown);
    if (args.values['json'] === true) {
      io.out(
        safeJson({
          repo: target.uri,
          commit,
          ...(branch === undefined ? {} : { branch, protected: v.required !== undefined }),
          checks: shown.map((s) => ({
            context: s.context,
            state: s.state,
            runner: name(s.runner),
            runnerDid: s.runner,
            trusted: s.trusted,
            ...(s.targetUrl === undefined ? {} : { targetUrl: s.targetUrl }),
            ...(s.description === undefined ? {} : { description: s.description }),
          })),
          ...(more === 0 ? {} : { moreUntrusted: more }),
          ...(v.cut.length === 0
            ? {}
            : { partlyRead: v.cut.map((x) => ({ runner: x.name, runnerDid: x.runner, read: x.read })) }),
          ...(v.required === undefined
            ? {}
            : {
                required: v.required,
                unmet: v.unmet.map((u) => ({ context: u.context, kind: u.kind, reason: u.reason, by: u.by })),
              }),
        }),
      );
      return;
    }
    io.out(`${target.label} ${commit}${branch === undefined ? '' : ` (${safeText(branch)})`}`);
    if (shown.length === 0) io.out('  no checks');
    for (const s of shown) {
      const about = [s.description, s.targetUrl].filter((x) => x !== undefined).map((x) => safeText(x, 300));
      io.out(
        `  ${safeText(s.context, 100)}  ${s.state.padEnd(7)}  ${safeText(name(s.runner))}${s.trusted ? ' (trusted)' : ' (untrusted)'}${about.length === 0 ? '' : `  ${about.join('  ')}`}`,
      );
    }
    if (more > 0)
      // An untrusted account read only in part may hold more: the count is then a lower bound.
      io.out(`  … ${moreUntrusted(more, v.cut.length > 0)} (--all lists them)`);
    for (const x of v.cut)
      io.out(
        `  … only the newest ${x.read} check records of ${safeText(x.name)} (untrusted) were read (--all reads them all)`,
      );
    if (v.required !== undefined) {
      if (v.unmet.length === 0)
        io.out(
          `  required checks: all passed (${v.required.map((x) => safeText(x, 100)).join(', ') || 'none'})`,
        );
      else for (const u of v.unmet) io.out(`  waiting: ${u.reason}`);
    }
  },
};
