import { activeSession } from '../../auth/login.ts';
import { KnotlessError } from 'knotless-core/errors';
import { writeCheck } from 'knotless-core/forge/checks-store';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { CHECK_STATES, parseCheck, type CheckState } from '../../forge/records.ts';
import { JSON_OPTION, stringOption, type Command } from '../command.ts';
import { forgeReader, targetOf } from '../forge-shared.ts';
import { commitInRepository } from '../../forge/checks.ts';

export const command: Command = {
  name: 'check set',
  args: '<[handle/]repo> <commit>',
  summary: "record a check's verdict on a commit (a record in your account: you are its runner)",
  details: [
    "A check is a claim by the account that writes it. It counts for a protected branch only when the repository's owner trusts that account (`knotless repo protect --runner`), or is it. A later verdict on the same commit and context replaces your earlier one: write pending, then success or failure.",
  ],
  options: {
    context: { type: 'string', value: 'NAME', help: 'what was checked, such as test or lint (required)' },
    state: { type: 'string', value: 'STATE', help: `the verdict: ${CHECK_STATES.join(', ')} (required)` },
    url: { type: 'string', value: 'URL', help: "the run's details: an https or http address" },
    description: { type: 'string', value: 'TEXT', help: 'one line about the verdict' },
    force: { type: 'boolean', help: 'record it even when the commit is not found in the repository' },
    json: JSON_OPTION,
  },
  examples: ['knotless check set alice.example/site 0123…cdef --context test --state success'],
  positionals: { min: 2, max: 2 },
  async run({ ctx, io, args }) {
    const commit = args.positionals[1]!.toLowerCase();
    if (!/^[0-9a-f]{40}$/.test(commit))
      throw new KnotlessError('usage', 'A check is on one commit: give its full id, 40 hex digits.');
    const context = stringOption(args, 'context');
    if (context === undefined) throw new KnotlessError('usage', 'Say what was checked with --context.');
    const state = stringOption(args, 'state');
    if (state === undefined || !(CHECK_STATES as readonly string[]).includes(state))
      throw new KnotlessError('usage', `--state is one of ${CHECK_STATES.join(', ')}.`);
    const url = stringOption(args, 'url');
    const description = stringOption(args, 'description');
    const c = ctx();
    const target = await targetOf(c, args.positionals[0]!);
    const auth = await activeSession(c);
    const reader = forgeReader(c, io);
    // What the search said on the way (where pull requests were looked for) is printed only when the
    // check is written: a refusal is one sentence that already says it.
    const notes: string[] = [];
    const searching = { ...reader, note: (m: string) => notes.push(m) };
    if (
      args.values['force'] !== true &&
      !(await commitInRepository(searching, target.owner, target.name, target.uri, commit, auth.session.did))
    )
      throw new KnotlessError(
        'not-found',
        `${commit.slice(0, 12)} is in no branch, tag or pull request of ${target.label}; check the commit id (a pull request from another account is found through the appview, KNOTLESS_APPVIEW), or record the check anyway with --force.`,
      );
    const { made, record } = await writeCheck(reader.store, auth, parseCheck, {
      repo: target.uri,
      commit,
      context,
      state: state as CheckState,
      ...(url === undefined ? {} : { targetUrl: url }),
      ...(description === undefined ? {} : { description }),
    });
    for (const n of notes) io.err(`knotless: ${n}`);
    io.err(
      `Recorded ${safeText(context)}: ${state} on ${commit.slice(0, 12)} of ${target.label}, as ${safeText(auth.session.handle)}.`,
    );
    if (args.values['json'] === true)
      io.out(safeJson({ uri: made.uri, runner: auth.session.did, ...record }));
    else io.out(made.uri);
  },
};
