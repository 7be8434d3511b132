import { XrpcError, type XrpcClient } from '../xrpc/client.ts';
import { pdsRefusal } from '../xrpc/pds-errors.ts';
import { inactiveAccount } from './inactive.ts';
import type { Identity, IdentityResolver } from './resolver.ts';

/** What a PDS says of an account it holds (`com.atproto.sync.getRepoStatus`). */
interface RepoStatus {
  active?: unknown;
  status?: unknown;
}

/**
 * Where an account lives now, after its PDS answered that it does not serve it: resolves its DID
 * afresh (the cached document may be a move behind), and returns the PDS to ask instead when the
 * document names another one; when it names the same, asks that PDS for the account's status and
 * throws the one sentence saying what became of it. `onMoved` is told the new identity.
 */
export async function relocateAccount(
  resolver: IdentityResolver,
  client: (service: string) => XrpcClient,
  did: string,
  from: string,
  onMoved: (now: Identity) => void = () => {},
): Promise<string | undefined> {
  const before = resolver.cache.did(did);
  const now = await resolver.resolve(did, { fresh: true });
  const service = resolver.serviceFor(now);
  if (now.pds !== (before?.pds ?? from)) {
    onMoved(now);
    return service;
  }
  const name = now.handle ?? before?.handle ?? did;
  let status: RepoStatus;
  try {
    status = await client(service).query<RepoStatus>('com.atproto.sync.getRepoStatus', { did });
  } catch (err) {
    // Its PDS holds no such account any more, while its DID document still names that PDS: deleted.
    if (err instanceof XrpcError && pdsRefusal(err) === 'account-gone')
      throw inactiveAccount(name, now.pds, 'deleted');
    throw err;
  }
  if (status.active === true) return service;
  throw inactiveAccount(name, now.pds, typeof status.status === 'string' ? status.status : 'inactive');
}
