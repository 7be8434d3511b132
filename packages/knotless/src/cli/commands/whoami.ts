import { activeSession } from '../../auth/login.ts';
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
    let res: { handle: string; did: string };
    try {
      res = await c.client(auth.session.pds, auth).query('com.atproto.server.getSession');
    } catch (err) {
      throw generalFailure(err, 'checking your session');
    }
    if (args.values['json'] === true) {
      io.out(JSON.stringify({ handle: res.handle, did: res.did, pds: auth.session.pds }));
      return;
    }
    io.out(`${res.handle} (${res.did}) on ${auth.session.pds}`);
  },
};
