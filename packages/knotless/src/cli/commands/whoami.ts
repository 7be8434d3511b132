import { activeSession } from '../../auth/login.ts';
import { generalFailure } from '../../xrpc/client.ts';
import { safeText } from '../../text/terminal.ts';
import type { Command } from '../command.ts';

export const command: Command = {
  usage: 'whoami',
  summary: 'show the account commands act as',
  positionals: { min: 0, max: 0 },
  async run({ ctx, io }) {
    const c = ctx();
    const auth = await activeSession(c);
    // Asking the PDS proves the session still works (and refreshes it when due).
    let res: { handle: string; did: string };
    try {
      res = await c.client(auth.session.pds, auth).query('com.atproto.server.getSession');
    } catch (err) {
      throw generalFailure(err, 'checking your session');
    }
    io.out(`${safeText(String(res.handle))} (${safeText(String(res.did))}) on ${safeText(auth.session.pds)}`);
  },
};
