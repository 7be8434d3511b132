import { login } from '../../auth/login.ts';
import { KnotlessError } from '../../errors.ts';
import { safeText } from '../../text/terminal.ts';
import { stringOption, type Command } from '../command.ts';
import { readSecret } from '../prompt.ts';

export const command: Command = {
  name: 'login',
  args: '<handle>',
  summary: 'log in to your account and make it the current one',
  details: [
    'Without --app-password the password is read from the terminal without echo, or as one line of standard input. Use an app password (Bluesky: Settings, Privacy and security, App passwords), not your main one.',
  ],
  options: {
    'app-password': { type: 'string', value: 'P', help: 'the app password (else it is asked for)' },
  },
  examples: ['knotless login alice.bsky.social'],
  positionals: { min: 1, max: 1 },
  async run({ ctx, io, args }) {
    const handle = args.positionals[0]!;
    const password =
      stringOption(args, 'app-password') ?? (await readSecret(io, `App password for ${handle}: `));
    if (password === '')
      throw new KnotlessError('usage', 'No password given; pass --app-password or type it at the prompt.');
    const session = await login(ctx(), handle, password, (line) => io.err(line));
    // A session's handle is the DID itself when no handle was verified: no need to say it twice.
    const who = session.handle === session.did ? session.did : `${safeText(session.handle)} (${session.did})`;
    io.err(`Logged in as ${who}.`);
  },
};
