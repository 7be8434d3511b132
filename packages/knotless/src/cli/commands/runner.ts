import { activeSession } from '../../auth/login.ts';
import { httpBaseUrl } from 'knotless-core/config/env';
import { KnotlessError } from 'knotless-core/errors';
import { checkToWrite, writeRecord, CHECK } from 'knotless-core/forge/records';
import { parseCheck } from '../../forge/records.ts';
import { Runner } from '../../runner/runner.ts';
import { stringOption, type Command } from '../command.ts';
import { forgeReader, targetOf } from '../forge-shared.ts';

/** A run's time limit when --timeout is not given: one hour. */
const DEFAULT_TIMEOUT_S = 3600;

export const command: Command = {
  name: 'runner',
  args: '--repo <[handle/]repo> --context NAME [--relay URL] -- <command>...',
  summary:
    'run a command on each new branch head and pull request round of a repository and record its verdict as a check',
  details: [
    "Runs in the foreground, logged in as the runner's account, until interrupted. It follows the owner's account on its PDS's event stream; on each new head commit of a branch it records `pending`, fetches the commit with knotless:// into a cache, runs the command in a scratch work tree (its own process group; KNOTLESS_RUNNER_COMMIT, KNOTLESS_RUNNER_BRANCH and KNOTLESS_RUNNER_REPO set), and records `success` (exit 0), `failure` (any other exit) or `error` (over the time limit, or it could not run), with the output's last line in the description.",
    "Each new round of a pull request on the repository is run the same way, its commit taken from the round's pack in its author's account (KNOTLESS_RUNNER_PULL set to the pull request, KNOTLESS_RUNNER_BRANCH to its base). Pull requests by accounts on other PDSes than the owner's are heard through a relay (--relay, such as https://bsky.network); the open ones are also listed as `pr list` lists them when the runner starts.",
    "The full output is kept in a log on this machine, under the runner's folder (its path is printed), never uploaded. The runner's state (the stream's cursor and the commits reported) is kept there too: started again, it reports nothing twice, and a run a killed runner left `pending` is recorded as `error` and run again. Ctrl-C ends a run under way as `error`.",
  ],
  options: {
    repo: { type: 'string', value: 'REPO', help: 'the repository to check, [handle/]name (required)' },
    context: { type: 'string', value: 'NAME', help: 'what is checked, such as test (required)' },
    relay: {
      type: 'string',
      value: 'URL',
      help: "a relay (http or https) whose event stream carries every account's pull requests",
    },
    timeout: {
      type: 'string',
      value: 'S',
      help: `a run's time limit in seconds (default ${DEFAULT_TIMEOUT_S}); past it, the run is an error`,
    },
  },
  examples: ['knotless runner --repo alice.example/site --context test -- npm test'],
  positionals: { min: 1, max: Infinity },
  async run({ ctx, io, args }) {
    const repo = stringOption(args, 'repo');
    if (repo === undefined) throw new KnotlessError('usage', 'Name the repository to check with --repo.');
    const context = stringOption(args, 'context');
    if (context === undefined) throw new KnotlessError('usage', 'Say what is checked with --context.');
    const timeoutText = stringOption(args, 'timeout') ?? String(DEFAULT_TIMEOUT_S);
    const timeout = Number(timeoutText);
    if (!/^\d+(\.\d+)?$/.test(timeoutText) || !(timeout > 0) || timeout > 7 * 24 * 3600)
      throw new KnotlessError('usage', '--timeout is a number of seconds, more than 0 and at most a week.');
    const relayText = stringOption(args, 'relay');
    const relay =
      relayText === undefined ? undefined : httpBaseUrl(relayText, '--relay', "give the relay's address");
    const c = ctx();
    const target = await targetOf(c, repo);
    // The context is checked by the rule every reader applies, before anything runs.
    await checkToWrite(
      parseCheck,
      writeRecord(CHECK, {
        repo: target.uri,
        commit: '0'.repeat(40),
        context,
        state: 'pending',
        createdAt: new Date().toISOString(),
      }),
      'check',
    );
    const auth = await activeSession(c);
    const runner = new Runner(c, forgeReader(c, io).store, auth, {
      owner: target.owner,
      name: target.name,
      label: target.label,
      repoUri: target.uri,
      context,
      command: args.positionals,
      timeoutMs: timeout * 1000,
      relay,
      log: (line) => io.err(`knotless runner: ${line}`),
    });
    const stop = (): void => runner.stop();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    await runner.run();
    io.err('knotless runner: stopped');
  },
};
