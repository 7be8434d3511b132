import { login } from '../../auth/login.ts';
import { DEFAULT_SCOPE } from '../../auth/oauth-client.ts';
import { oauthLogin } from '../../auth/oauth-login.ts';
import { KnotlessError } from 'knotless-core/errors';
import { safeText } from 'knotless-core/text/terminal';
import { stringOption, type Command } from '../command.ts';
import { readSecret } from '../prompt.ts';

export const command: Command = {
  name: 'login',
  args: '<handle>',
  summary: 'log in to your account and make it the current one',
  details: [
    'By default with OAuth: knotless prints an address (and opens it in your browser unless --no-browser); you sign in at your own PDS and approve access, and the PDS sends you back to knotless on 127.0.0.1. knotless asks only to write its own records (dev.knotless.*: repositories, refs, pull requests, issues, their states and comments) and to upload pack blobs; you can revoke it at your PDS, and `knotless logout` revokes it too. On bsky.social such a session lasts at most two weeks; then log in again.',
    'With an app password instead: --password to type it (read without echo, or as one line of standard input), or --password P (the same as --app-password P). Use an app password (Bluesky: Settings, Privacy and security, App passwords), not your main one.',
    "A password on the command line is visible to this machine's other users while the command runs (in the process list) and stays in your shell's history: prefer --password alone, or for scripts and CI, KNOTLESS_IDENTIFIER and KNOTLESS_PASSWORD in the environment.",
  ],
  options: {
    'app-password': { type: 'string', value: 'P', help: 'log in with this app password instead of OAuth' },
    password: {
      type: 'boolean',
      optionalValue: true,
      value: 'P',
      help: 'log in with this app password, or one asked for on the terminal when P is not given',
    },
    'no-browser': { type: 'boolean', help: 'OAuth: only print the sign-in address, do not open a browser' },
    scope: {
      type: 'string',
      value: 'S',
      help: `OAuth: the scopes to ask for (default: "${DEFAULT_SCOPE}")`,
    },
  },
  examples: [
    'knotless login alice.bsky.social',
    'knotless login alice.bsky.social --no-browser',
    'knotless login alice.bsky.social --password',
  ],
  positionals: { min: 1, max: 1 },
  async run({ ctx, io, args }) {
    const handle = args.positionals[0]!;
    const typed = args.values['password'];
    if (typed !== undefined && stringOption(args, 'app-password') !== undefined)
      throw new KnotlessError('usage', '--app-password and --password both give the password; use one.');
    const given = stringOption(args, 'app-password') ?? (typeof typed === 'string' ? typed : undefined);
    if (given === undefined && typed !== true) {
      const scope = stringOption(args, 'scope');
      const session = await oauthLogin(ctx(), handle, {
        browser: args.values['no-browser'] !== true,
        notice: (line) => io.err(line),
        ...(scope === undefined ? {} : { scope }),
      });
      const who =
        session.handle === session.did ? session.did : `${safeText(session.handle)} (${session.did})`;
      io.err(`Logged in as ${who} with OAuth.`);
      return;
    }
    if (stringOption(args, 'scope') !== undefined)
      throw new KnotlessError('usage', '--scope applies to OAuth logins, not to app passwords.');
    const password = given ?? (await readSecret(io, `App password for ${handle}: `));
    if (password === '')
      throw new KnotlessError('usage', 'No password given; pass --app-password or type it at the prompt.');
    const session = await login(ctx(), handle, password, (line) => io.err(line));
    // A session's handle is the DID itself when no handle was verified: no need to say it twice.
    const who = session.handle === session.did ? session.did : `${safeText(session.handle)} (${session.did})`;
    io.err(`Logged in as ${who}.`);
  },
};
