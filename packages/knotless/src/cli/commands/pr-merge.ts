import { activeSession } from '../../auth/login.ts';
import { KnotlessError } from 'knotless-core/errors';
import { commitVerdict } from '../../forge/checks.ts';
import { PULLS } from '../../forge/kinds.ts';
import { ignoredChecks as ignoredOf, pastChecksRefusal, unmetSentence } from 'knotless-core/forge/checks';
import { mergePull, type MergeMethod } from 'knotless-core/forge/merge';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, stringOption, type Command } from '../command.ts';
import { itemFor, itemJson, stateWriteOf, writeState } from '../forge-shared.ts';
import { checkStateWrite } from 'knotless-core/forge/state-write';

export const command: Command = {
  name: 'pr merge',
  args: '<[handle/]repo> <id>',
  summary: "merge a pull request's last round into its base branch (the repository's owner or a maintainer)",
  details: [
    "The round's commits come from the pack in the author's account, so a pull request merges even after its branch was deleted. --merge (the default) fast-forwards when it can and otherwise makes a merge commit; --squash makes one commit; --rebase replays the commits on the base branch (fast-forwarding when it can).",
    "--match-head-commit refuses, writing nothing, when the pull request's head is not the commit you reviewed (as gh pr merge does).",
    "Into a protected branch (`knotless repo protect`), a merge waits until every required check of the round's head commit has passed, each by a runner that counts for the account that required it (the owner, that account, or a runner it trusts); --ignore-checks (the owner's alone) merges anyway, past the maintainers' requirements too, and the pull request's merged status records which checks were ignored and why, for everyone to see.",
    "A maintainer merges as the owner does: the base branch is pushed into the maintainer's own account, as their git push would be, and the merged status is written there.",
    'The base branch is written like any push, with compare-and-swap: if it moved meanwhile, or the merge conflicts, nothing is written. Then the merged status is recorded in your account.',
  ],
  options: {
    merge: { type: 'boolean', help: 'a merge commit, or a fast-forward when possible (default)' },
    squash: { type: 'boolean', help: 'one commit with all the changes' },
    rebase: { type: 'boolean', help: 'the commits replayed on the base branch' },
    'match-head-commit': {
      type: 'string',
      value: 'OID',
      help: "merge only if the pull request's head (its last round) is this commit (7 to 40 hex digits)",
    },
    'ignore-checks': {
      type: 'boolean',
      help: "merge though the base branch's required checks have not passed (recorded on the pull request)",
    },
    json: JSON_OPTION,
  },
  positionals: { min: 2, max: 2 },
  async run({ ctx, io, args }) {
    const methods = (['merge', 'squash', 'rebase'] as const).filter((m) => args.values[m] === true);
    if (methods.length > 1) throw new KnotlessError('usage', 'Choose one of --merge, --squash and --rebase.');
    const method: MergeMethod = methods[0] ?? 'merge';
    const match = stringOption(args, 'match-head-commit')?.toLowerCase();
    if (match !== undefined && !/^[0-9a-f]{7,40}$/.test(match))
      throw new KnotlessError('usage', '--match-head-commit takes a commit id of 7 to 40 hex digits.');
    const c = ctx();
    const { target, item, r } = await itemFor(c, io, PULLS, args);
    const auth = await activeSession(c);
    // The owner and the maintainers merge, by the rule a merged status is written under; anyone
    // else is refused before anything moves. A maintainer's merge is a push of the base branch into
    // their own ref table, and the core's merge reads the owner's table again before it writes.
    checkStateWrite(await stateWriteOf(r, auth, target, item, PULLS, 'merged'));
    if (item.state !== 'open')
      throw new KnotlessError(
        'usage',
        `${safeText(item.id)} is ${item.state}; only an open pull request merges.`,
      );
    // What was reviewed is what merges: a round pushed since then is refused before anything moves.
    const head = item.record.rounds.at(-1)!.head;
    if (match !== undefined && !head.startsWith(match))
      throw new KnotlessError(
        'remote-changed',
        `${safeText(item.id)}'s head is ${head.slice(0, 12)}, not ${safeText(match)}; nothing was merged (view it again with \`knotless pr view\`).`,
      );
    // The protection is read from the owner's and the listed maintainers' accounts, the checks from
    // the accounts that count for some requirement.
    const verdict = await commitVerdict(r, target.owner, target.name, head, item.record.base, []);
    const ignore = args.values['ignore-checks'] === true;
    const past = pastChecksRefusal(
      { did: target.owner.did, name: target.owner.handle ?? target.owner.did },
      auth.session.did,
      verdict.unmet,
      ignore,
    );
    if (past !== undefined) throw new KnotlessError('permission-denied', past);
    if (verdict.unmet.length > 0 && !ignore)
      throw new KnotlessError(
        'checks-unmet',
        unmetSentence(item.id, item.record.base, head, verdict.unmet, '--ignore-checks'),
      );
    const ignoredChecks = ignore ? ignoredOf(verdict.unmet) : [];
    const author = await c.resolver.resolve(item.did);
    const result = await mergePull(c, {
      target: c.remoteRepo(target.owner, target.name, (m) => io.err(`knotless: warning: ${m}`)),
      auth,
      pusher: { did: auth.session.did, handle: auth.session.handle },
      author,
      pull: item.record,
      id: item.id,
      method,
    });
    await writeState(r, auth, PULLS, target, item, 'merged', {
      merged: result.after,
      ...(ignoredChecks.length === 0 ? {} : { ignoredChecks }),
    }).catch((err: unknown) => {
      // The branch is written: say so, and how to record it (a second merge finds it merged and records only that).
      throw new KnotlessError(
        err instanceof KnotlessError ? err.code : 'pds-error',
        `${safeText(item.record.base)} now holds the pull request (${result.after}), but its merged status was not written (${err instanceof Error ? safeText(err.message) : 'unknown'}); run \`knotless pr merge\` again to record it.`,
        { cause: err },
      );
    });
    const how = result.alreadyIn
      ? 'already held it'
      : result.fastForward
        ? 'fast-forwarded'
        : `${method === 'merge' ? 'merged' : method === 'squash' ? 'squashed' : 'rebased'}`;
    for (const why of ignoredChecks) io.err(`knotless: merged ignoring a required check: ${why}`);
    io.err(
      `Merged ${safeText(item.id)} into ${safeText(item.record.base)} of ${target.label} (${how}): ${result.before.slice(0, 12)} → ${result.after.slice(0, 12)}.`,
    );
    if (args.values['json'] === true)
      io.out(
        safeJson({
          ...itemJson(item),
          state: 'merged',
          merged: result.after,
          ...(ignoredChecks.length === 0 ? {} : { ignoredChecks }),
          before: result.before,
          fastForward: result.fastForward,
        }),
      );
    else io.out(result.after);
  },
};
