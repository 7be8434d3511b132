import path from 'node:path';
import Database from 'better-sqlite3';
import { NetworkError, pdsInDocument, type NetworkPds } from './network.ts';

/** What {@link migrateAccount} is handed: the network's PLC, the two PDSes, the account and its password. */
export interface MigrateOptions {
  plcUrl: string;
  from: NetworkPds;
  to: NetworkPds;
  /** The account's handle or DID. */
  account: string;
  password: string;
  /** Told each step as it starts, one line each. */
  step: (line: string) => void;
}

interface Session {
  did: string;
  handle: string;
  email?: string;
  accessJwt: string;
}

/** One XRPC call to a dev PDS; a refusal is a NetworkError naming the step, the PDS and its answer. */
async function call<T>(
  pds: string,
  nsid: string,
  opts: {
    token?: string;
    params?: Record<string, string>;
    json?: unknown;
    bytes?: Uint8Array;
    type?: string;
    /** A procedure without input (POST, no body). */
    post?: true;
  },
): Promise<T> {
  const url = new URL(`${pds}/xrpc/${nsid}`);
  for (const [k, v] of Object.entries(opts.params ?? {})) url.searchParams.set(k, v);
  const headers: Record<string, string> = {};
  if (opts.token !== undefined) headers['authorization'] = `Bearer ${opts.token}`;
  let body: string | Blob | undefined;
  if (opts.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(opts.json);
  } else if (opts.bytes !== undefined) {
    headers['content-type'] = opts.type ?? 'application/octet-stream';
    body = new Blob([new Uint8Array(opts.bytes)]);
  }
  const post = opts.json !== undefined || opts.bytes !== undefined || opts.post === true;
  const res = await fetch(url, {
    method: post ? 'POST' : 'GET',
    headers,
    ...(body === undefined ? {} : { body }),
  });
  const buf = Buffer.from(await res.arrayBuffer());
  if (!res.ok)
    throw new NetworkError(`${nsid} on ${pds} failed: ${res.status} ${buf.toString('utf8').slice(0, 300)}`);
  const type = res.headers.get('content-type') ?? '';
  if (type.startsWith('application/json')) return JSON.parse(buf.toString('utf8')) as T;
  return (buf.length === 0 ? undefined : buf) as T;
}

/**
 * The PLC-operation token the PDS sent by mail: the dev PDSes have no mail server (their mailer
 * writes to nowhere), so it is read where the PDS keeps it, its account database's `email_token`
 * table, as an operator with a mail server would read it from the account's inbox.
 */
function mailedToken(pds: NetworkPds, did: string): string {
  const db = new Database(path.join(pds.dataDir, 'account.sqlite'), { readonly: true, fileMustExist: true });
  try {
    const row = db
      .prepare("SELECT token FROM email_token WHERE did = ? AND purpose = 'plc_operation'")
      .get(did) as { token: string } | undefined;
    if (row === undefined) throw new NetworkError(`${pds.url} issued no PLC operation token for ${did}.`);
    return row.token;
  } finally {
    db.close();
  }
}

/**
 * Moves an account from one PDS of the network to another by the standard migration steps (those of
 * atproto's account migration guide and goat's `account migrate`), in an order of its own that
 * loses no write: service auth from the old PDS, createAccount with the existing DID on the new one,
 * then the old account deactivated BEFORE its repository is copied (the guide and goat copy first
 * and deactivate last, so every write the old PDS acknowledges in between stays behind in its
 * deactivated copy), the repository's CAR imported and every missing blob uploaded (read with the
 * account's own token: a deactivated account's repository and blobs are served to it alone), the
 * PLC operation signed by the old PDS and submitted through the new one, then the new account
 * activated. When a step fails before the PLC operation is submitted, the old account is activated
 * again, so that the account stays where it was. Each call is what a real PDS would get.
 * A PDS that already holds the account (it moved away from there before) gets no createAccount,
 * which would refuse the DID: the account logs in there and the same steps bring that copy up to date.
 */
export async function migrateAccount(opts: MigrateOptions): Promise<{ did: string; handle: string }> {
  const { from, to, step } = opts;
  step(`logging in to ${from.url}`);
  const old = await call<Session>(from.url, 'com.atproto.server.createSession', {
    json: { identifier: opts.account, password: opts.password },
  });
  const { email } = await call<{ email?: string }>(from.url, 'com.atproto.server.getSession', {
    token: old.accessJwt,
  });
  const { did, handle } = old;
  const fresh = (await heldBy(to.url, did))
    ? await returnTo(to.url, did, handle, opts.password, step)
    : await createOn(from.url, to, old, email, opts.password, step);

  // The copy is made after the old account stops taking writes, never before: a push in flight now
  // is refused by the old PDS (AccountDeactivated) and fails, where it would have been acknowledged
  // and then left behind.
  step(`deactivating ${handle} on ${from.url}, so that it takes no write the copy would miss`);
  await call(from.url, 'com.atproto.server.deactivateAccount', { token: old.accessJwt, json: {} });
  let operation: unknown;
  try {
    await copyRepository(from, to, old, fresh, step);
    operation = await signPlcOperation(from, to, old, fresh, step);
  } catch (err) {
    step(`the move stopped before the PLC operation: activating ${handle} on ${from.url} again`);
    await call(from.url, 'com.atproto.server.activateAccount', { token: old.accessJwt, post: true });
    throw err;
  }
  step(`submitting it through ${to.url}`);
  await call(to.url, 'com.atproto.identity.submitPlcOperation', {
    token: fresh.accessJwt,
    json: { operation },
  });
  const named = await pdsInDocument(opts.plcUrl, did);
  if (named !== to.url) throw new NetworkError(`The PLC directory names ${named} for ${did}, not ${to.url}.`);

  step(`activating ${handle} on ${to.url}`);
  await call(to.url, 'com.atproto.server.activateAccount', { token: fresh.accessJwt, post: true });
  return { did, handle };
}

/**
 * Copies the old (deactivated) account's repository and blobs to the new PDS: its CAR imported
 * (again while the old repository's commit moved under it), then every blob listMissingBlobs names;
 * stops when checkAccountStatus counts one missing.
 */
async function copyRepository(
  from: NetworkPds,
  to: NetworkPds,
  old: Session,
  fresh: Session,
  step: (line: string) => void,
): Promise<void> {
  const { did, handle } = old;
  // The old PDS refuses writes from the deactivation on, but one it had let in just before can
  // still be committing: the copy is made again until the old repository's commit is the same
  // before and after it, so that no write lands there after the copy was read.
  const latest = async () =>
    (
      await call<{ rev: string }>(from.url, 'com.atproto.sync.getLatestCommit', {
        token: old.accessJwt,
        params: { did },
      })
    ).rev;
  for (let attempt = 1; ; attempt++) {
    const before = await latest();
    step(`importing the repository (its CAR from ${from.url})`);
    const car = await call<Buffer>(from.url, 'com.atproto.sync.getRepo', {
      token: old.accessJwt,
      params: { did },
    });
    await call(to.url, 'com.atproto.repo.importRepo', {
      token: fresh.accessJwt,
      bytes: car,
      type: 'application/vnd.ipld.car',
    });
    const after = await latest();
    if (after === before) break;
    if (attempt === 3)
      throw new NetworkError(
        `${handle}'s repository on ${from.url} kept changing after its deactivation (revision ${before}, then ${after}); the move stopped before the PLC operation.`,
      );
    step(`${from.url} committed a write after the copy was read: copying again`);
  }

  let blobs = 0;
  let cursor: string | undefined;
  do {
    const page = await call<{ cursor?: string; blobs: Array<{ cid: string }> }>(
      to.url,
      'com.atproto.repo.listMissingBlobs',
      { token: fresh.accessJwt, params: { limit: '500', ...(cursor === undefined ? {} : { cursor }) } },
    );
    for (const { cid } of page.blobs) {
      const bytes = await call<Buffer | undefined>(from.url, 'com.atproto.sync.getBlob', {
        token: old.accessJwt,
        params: { did, cid },
      });
      await call(to.url, 'com.atproto.repo.uploadBlob', {
        token: fresh.accessJwt,
        bytes: bytes ?? new Uint8Array(),
        type: 'application/octet-stream',
      });
      blobs++;
    }
    cursor = page.blobs.length === 0 ? undefined : page.cursor;
  } while (cursor !== undefined);
  step(`uploaded ${blobs} blob${blobs === 1 ? '' : 's'} listMissingBlobs named`);
  const status = await call<{ expectedBlobs: number; importedBlobs: number; indexedRecords: number }>(
    to.url,
    'com.atproto.server.checkAccountStatus',
    { token: fresh.accessJwt },
  );
  if (status.importedBlobs !== status.expectedBlobs) {
    throw new NetworkError(
      `${to.url} holds ${status.importedBlobs} of the ${status.expectedBlobs} blobs ${handle}'s records name; the move stopped before the PLC operation.`,
    );
  }
  step(`${to.url} holds ${status.indexedRecords} records and all ${status.expectedBlobs} blobs`);
}

/** The PLC operation naming the new PDS, signed by the old one (not yet submitted). */
async function signPlcOperation(
  from: NetworkPds,
  to: NetworkPds,
  old: Session,
  fresh: Session,
  step: (line: string) => void,
): Promise<unknown> {
  const { did } = old;
  step(`asking ${from.url} to sign the PLC operation naming ${to.url}`);
  const credentials = await call<Record<string, unknown>>(
    to.url,
    'com.atproto.identity.getRecommendedDidCredentials',
    { token: fresh.accessJwt },
  );
  await call(from.url, 'com.atproto.identity.requestPlcOperationSignature', {
    token: old.accessJwt,
    post: true,
  });
  const { operation } = await call<{ operation: unknown }>(
    from.url,
    'com.atproto.identity.signPlcOperation',
    {
      token: old.accessJwt,
      json: { token: mailedToken(from, did), ...credentials },
    },
  );
  return operation;
}

/**
 * Whether a PDS already holds the account (a copy it left deactivated when the account moved away):
 * `getRepoStatus` answers for any account it holds, active or not.
 */
async function heldBy(pds: string, did: string): Promise<boolean> {
  const res = await fetch(`${pds}/xrpc/com.atproto.sync.getRepoStatus?did=${encodeURIComponent(did)}`);
  if (res.ok) return true;
  const body = (await res.json().catch(() => ({}))) as { error?: unknown };
  if (res.status === 400 && body.error === 'RepoNotFound') return false;
  throw new NetworkError(
    `com.atproto.sync.getRepoStatus on ${pds} failed: ${res.status} ${JSON.stringify(body)}`,
  );
}

/**
 * The new PDS's account, created with the existing DID: service auth from the old PDS addressed to
 * the new one, then createAccount (deactivated until the move is done).
 */
async function createOn(
  from: string,
  to: NetworkPds,
  old: Session,
  email: string | undefined,
  password: string,
  step: (line: string) => void,
): Promise<Session> {
  const { did, handle } = old;
  step(`asking ${from} for a service-auth token addressed to ${to.did}`);
  const described = await call<{ did: string }>(to.url, 'com.atproto.server.describeServer', {});
  const { token: serviceAuth } = await call<{ token: string }>(from, 'com.atproto.server.getServiceAuth', {
    token: old.accessJwt,
    params: {
      aud: described.did,
      lxm: 'com.atproto.server.createAccount',
      exp: String(Math.floor(Date.now() / 1000) + 300),
    },
  });
  step(`creating ${handle} (${did}) on ${to.url}, deactivated until the move is done`);
  return call<Session>(to.url, 'com.atproto.server.createAccount', {
    token: serviceAuth,
    json: { did, handle, email: email ?? `${handle}@knotless.invalid`, password },
  });
}

/**
 * Moving back to a PDS the account left: it still holds the account, deactivated, so there is
 * nothing to create (createAccount would refuse the DID it holds); the account logs in there, as a
 * deactivated account may, and the steps that follow bring that copy up to date (importRepo onto
 * the repository it holds, the blobs it lacks) before it is activated again.
 */
async function returnTo(
  to: string,
  did: string,
  handle: string,
  password: string,
  step: (line: string) => void,
): Promise<Session> {
  step(`${to} still holds ${handle} (${did}), deactivated since it left: logging in there`);
  return call<Session>(to, 'com.atproto.server.createSession', {
    json: { identifier: did, password },
  });
}
