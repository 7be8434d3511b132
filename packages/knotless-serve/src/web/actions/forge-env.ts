// What the forge's browser actions share: the reader's writer, repositories as the core's
// RemoteRepo, records checked as the index checks them, failures as one sentence with a status.
import type http from 'node:http';
import { KnotlessError, isKnotlessError } from 'knotless-core/errors';
import { checkToWrite, writeRecord } from 'knotless-core/forge/records';
import { kindOf, type ForgeCollection } from 'knotless-core/forge/kinds/table';
import { ForgeStore } from 'knotless-core/forge/store';
import type { Identity } from 'knotless-core/identity/resolver';
import { RemoteRepo } from 'knotless-core/records/remote-repo';
import { readerAuth, type ReaderAuth } from '../../auth/authorizer.ts';
import type { Viewer } from '../../auth/web-sessions.ts';
import { forgeRecords } from '../../model/forge-records.ts';
import { HttpError, type Site } from '../site.ts';

/** The reader's OAuth session as a writer for the core's operations. */
export async function writerFor(site: Site, viewer: Viewer): Promise<ReaderAuth> {
  if (site.signIn === undefined) throw new HttpError(404, 'Sign-in is not set up on this appview.');
  const signIn = site.signIn;
  return readerAuth(
    {
      oauth: signIn.oauth,
      client: signIn.client,
      transport: site.transport,
      grantedBy: (did) => signIn.grantedBy(did),
      async pdsNow(did) {
        try {
          return (await site.identities.owner(did, true)).pds ?? undefined;
        } catch (err) {
          // Unresolved, the sentence cannot name a move: it says the sign-in no longer holds.
          site.log(`resolving ${did} after its sign-in lapsed: ${String(err)}`);
          return undefined;
        }
      },
      ended: (did) => site.sessions.endAll(did),
    },
    viewer.did,
    viewer.handle,
  );
}

/** The core's record store, reading and writing through the appview's transport. */
export function forgeStore(site: Site): ForgeStore {
  return new ForgeStore(site.forge, (m) => site.log(m));
}

/** An account as the core's operations name it: DID, verified handle, PDS. */
export async function identityOf(site: Site, did: string): Promise<Identity> {
  const o = await site.identities.owner(did);
  if (o.pds === null) throw new HttpError(502, 'That account has no PDS the appview can reach.');
  return { did: o.did, pds: o.pds, ...(o.handle === null ? {} : { handle: o.handle }) } as Identity;
}

/**
 * A repository's refs on its owner's PDS, as the core reads and writes them: its ref table read with
 * its proof (so that a merge or an edit writes the table of a repository that has one, never ref
 * records every reader ignores), with its maintainers' tables when it names some, else its ref records.
 */
export function remoteRepo(site: Site, owner: Identity, name: string): RemoteRepo {
  return new RemoteRepo(
    {
      reader: site.forge.client(owner.pds),
      writer: (auth) => site.forge.client(owner.pds, auth),
      verify: {
        transport: site.transport,
        plcUrl: site.plcUrl,
        // The PDS the DID document names, read for the key; else the one the index resolved.
        service: (named) => named ?? owner.pds,
      },
      // A team's repository is read as every reader reads it, each maintainer's table from their
      // own account: a merge into it (or an edit of it) lists the team's refs first.
      member: async (did) => remoteRepo(site, await identityOf(site, did), name),
    },
    owner,
    name,
    (m) => site.log(m),
  );
}

/**
 * The JSON of a record to write, checked exactly as the index will read it: nothing is written
 * that every reader would skip.
 */
export async function checkedRecord(
  collection: ForgeCollection,
  record: object,
): Promise<Record<string, unknown>> {
  const json = writeRecord(collection, record);
  try {
    await checkToWrite((v) => forgeRecords.any(collection, v), json, kindOf(collection).noun);
  } catch (err) {
    if (isKnotlessError(err, 'usage')) throw new HttpError(400, err.message);
    throw err;
  }
  return json;
}

/** The HTTP status of a failure of the core's operations: who may (403), who was first (409). */
export function statusOf(err: KnotlessError): number {
  switch (err.code) {
    case 'permission-denied':
      return 403;
    case 'session-expired':
    case 'not-logged-in':
      return 401;
    case 'remote-changed':
    case 'merge-conflict':
      return 409;
    case 'usage':
    case 'invalid-name':
      return 400;
    case 'not-found':
    case 'repo-missing':
      return 404;
    case 'too-large':
      return 413;
    default:
      return 502;
  }
}

/**
 * Runs an action, turning the core's errors into one sentence with its status; a sign-in that no
 * longer holds is answered by `lapsed` when given (the form's own page, with what was typed).
 */
export async function asPage<T>(
  work: () => Promise<T>,
  lapsed?: (sentence: string) => HttpError,
): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (lapsed !== undefined && isKnotlessError(err, 'session-expired')) throw lapsed(err.message);
    if (err instanceof KnotlessError) throw new HttpError(statusOf(err), err.message);
    throw err;
  }
}

/** Waits (briefly) until the index has what was just written, so the next page shows it. */
export async function untilIndexed(check: () => Promise<boolean>): Promise<void> {
  // The appview follows the PDS's event stream: a record written a moment ago arrives within
  // moments. Past the bound the reader is sent on anyway; the page fills in on the next load.
  for (let i = 0; i < 50; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

export type Form = URLSearchParams;

export interface ItemRef {
  kind: 'issues' | 'pulls';
  did: string;
  rkey: string;
  uri: string;
  state: string;
  labels: string[];
  page: string;
}

/** A required text field, trimmed; a sentence when it is missing. */
export function field(form: Form, name: string, what: string): string {
  const v = (form.get(name) ?? '').trim();
  if (v === '') throw new HttpError(400, `Give ${what}.`);
  return v;
}

export function seeOther(res: http.ServerResponse, location: string): void {
  res.writeHead(303, { location, 'cache-control': 'no-store' }).end();
}
