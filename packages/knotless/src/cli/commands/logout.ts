import { OAuthSession } from '../../auth/oauth-session.ts';
import { PasswordSession } from '../../auth/password-session.ts';
import { KnotlessError } from 'knotless-core/errors';
import { safeText } from 'knotless-core/text/terminal';
import type { Command } from '../command.ts';

export const command: Command = {
  name: 'logout',
  args: '[handle]',
  summary: 'log out (of the current account, or the one named): revoke the session at the PDS and forget it',
  positionals: { min: 0, max: 1 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const who = args.positionals[0];
    const current = c.sessions.current();
    const stored =
      who !== undefined ? c.sessions.find(who) : current === undefined ? undefined : c.sessions.get(current);
    if (stored === undefined) {
      throw new KnotlessError(
        'not-logged-in',
        who === undefined ? 'You are not logged in.' : `You are not logged in as ${who}.`,
      );
    }
    try {
      if (stored.kind === 'oauth') await new OAuthSession(c, c.sessions, stored).revoke();
      else await new PasswordSession(stored, c.sessions, c.client(stored.pds)).revoke();
    } finally {
      // Forgotten here even when the PDS could not be told: the user asked to be logged out.
      c.sessions.remove(stored.did);
    }
    io.err(`Logged out of ${safeText(stored.handle)}.`);
  },
};
