import { activeSession } from '../../auth/login.ts';
import { KnotlessError } from '../../errors.ts';
import { safeJson, safeText } from '../../text/terminal.ts';
import { generalFailure } from '../../xrpc/client.ts';
import { JSON_OPTION, type Command } from '../command.ts';

export const command: Command = {
  name: 'whoami',
  args: '',
  summary: 'show the account commands act as',
  options: { json: JSON_OPTION },
  positionals: { min: 0, max: 0 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const auth = await activeSession(c);
    // Asking the PDS proves the session still works (and refreshes it when due).
    let res: { did: unknown };
    try {
      res = await c.client(auth.session.pds, auth).query('com.atproto.server.getSession');
    } catch (err) {
      throw generalFailure(err, 'checking your session');
    }
    if (res.did !== auth.session.did) {
      throw new KnotlessError(
        'pds-error',
        `The PDS at ${safeText(auth.session.pds)} says this session belongs to another account; log in again.`,
      );
    }
    // The handle verified at login, not the one the PDS reports: a PDS's word for a handle is no proof.
    const { did, handle, pds } = auth.session;
    if (args.values['json'] === true) {
      io.out(safeJson({ handle, did, pds }));
      return;
    }
    io.out(`${safeText(handle)} (${did}) on ${safeText(pds)}`);
  },
};
