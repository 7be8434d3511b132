import type { RefRow, RepoRow } from '../../db/index-store.ts';
import type { Site } from '../site.ts';

/** An XRPC error answer: HTTP status, error name and message, as the XRPC spec shapes them. */
export class XrpcHttpError extends Error {
  override name = 'XrpcHttpError';
  readonly status: number;
  readonly error: string;
  constructor(status: number, error: string, message: string) {
    super(message);
    this.status = status;
    this.error = error;
  }
}

/** One query method: reads its parameters, returns the JSON body. */
export type XrpcHandler = (site: Site, params: URLSearchParams) => Promise<unknown>;

/** A required string parameter. */
export function required(params: URLSearchParams, name: string): string {
  const v = params.get(name);
  if (v === null || v === '') throw new XrpcHttpError(400, 'InvalidRequest', `${name} is required`);
  return v;
}

/** The `limit` parameter within 1..max. */
export function limitOf(params: URLSearchParams, dflt: number, max: number): number {
  const raw = params.get('limit');
  if (raw === null) return dflt;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max)
    throw new XrpcHttpError(400, 'InvalidRequest', `limit must be an integer from 1 to ${max}`);
  return n;
}

/** The DID of an actor parameter (handle or DID) known to the index. */
export async function actorDid(site: Site, actor: string): Promise<string> {
  const owner = await site.index.owner(actor);
  if (owner === undefined)
    throw new XrpcHttpError(400, 'ActorNotFound', `no knotless account ${actor} is known`);
  if (owner.status !== null)
    throw new XrpcHttpError(400, 'AccountInactive', `the account ${actor} is not active (${owner.status})`);
  return owner.did;
}

/** The lexicon's repoView. */
export function repoView(site: Site, r: RepoRow): Record<string, unknown> {
  const owner = r.handle ?? r.did;
  return {
    uri: `at://${r.did}/dev.knotless.repo/${r.name}`,
    did: r.did,
    ...(r.handle === null ? {} : { handle: r.handle }),
    name: r.name,
    ...(r.description === null ? {} : { description: r.description }),
    ...(r.created_at === null ? {} : { createdAt: r.created_at }),
    indexedAt: r.indexed_at,
    cloneUrl: `${site.publicUrl}/${owner}/${r.name}`,
    webUrl: `${site.publicUrl}/${encodeURIComponent(owner)}/${encodeURIComponent(r.name)}`,
  };
}

/** The lexicon's refView. */
export function refView(r: RefRow): Record<string, unknown> {
  return {
    ref: r.ref,
    ...(r.target === null ? {} : { target: r.target }),
    ...(r.symref === null ? {} : { symref: r.symref }),
    ...(r.peeled === null ? {} : { peeled: r.peeled }),
    updatedAt: r.updated_at,
  };
}
