import type { Index } from '../db/index-store.ts';
import type { Identities } from './identities.ts';

/** What an account's change tells the rest of the appview (the stream's hooks). */
interface AccountHooks {
  changed(did: string, repo: string): void;
  log(line: string): void;
}

/**
 * After an `#account` or `#identity` event of an account the index knows: resolves it again and asks
 * the PDS its DID document names now what it is, then hides its repositories and records (not
 * active), shows them again (active), or removes its rows and mirrors (deleted).
 */
export async function accountChanged(
  did: string,
  index: Index,
  identities: Identities,
  hooks: AccountHooks,
): Promise<void> {
  const before = await index.owner(did);
  if (before === undefined) return; // an account never indexed: nothing to hide or show
  const was = before.status;
  const owner = await identities.owner(did, true);
  const now = await identities.status(owner);
  if (now === undefined) return;
  // A PDS resolves no handle of an account it does not serve as active: the page that says what
  // became of the account names it by the handle it last had (which another account may yet claim).
  if (now !== null && owner.handle === null && before.handle !== null)
    await index.putOwner(did, before.handle, owner.pds);
  if (now === was) return;
  if (now === 'deleted') {
    const repos = await index.accounts.purge(did);
    hooks.log(`${did} was deleted: ${repos.length} repositories removed from the index`);
    // With no rows left, a sync removes the mirror.
    for (const repo of repos) hooks.changed(did, repo);
    return;
  }
  await index.accounts.setStatus(did, now);
  hooks.log(`${did} is ${now ?? 'active again'}`);
  if (now === null) for (const r of await index.repos({ did, limit: 1000 })) hooks.changed(did, r.name);
}
