import type { MembersEnv } from 'knotless-core/private/members';
import type { Context } from '../../context.ts';
import type { SessionAuthorizer } from '../../auth/store.ts';

/** What the key and membership commands need, for the logged-in account. */
export function membersEnv(c: Context, auth: SessionAuthorizer): MembersEnv {
  const owner = { did: auth.session.did, handle: auth.session.handle, pds: auth.session.pds };
  return {
    configDir: c.config.configDir,
    owner,
    reader: c.client(owner.pds),
    writer: c.client(owner.pds, auth),
    readerFor: (pds) => c.client(pds),
  };
}
