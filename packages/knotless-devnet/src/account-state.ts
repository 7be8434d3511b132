import path from 'node:path';
import Database from 'better-sqlite3';
import type { AttachedNetwork } from './attach.ts';
import { NetworkError, pdsInDocument, type NetworkPds } from './network.ts';

/** What `knotless dev account` can do to an account, as its user or as the PDS's operator. */
export const ACCOUNT_ACTIONS = ['deactivate', 'activate', 'takedown', 'restore', 'delete', 'handle'] as const;
export type AccountAction = (typeof ACCOUNT_ACTIONS)[number];

async function post(pds: string, nsid: string, auth: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`${pds}/xrpc/${nsid}`, {
    method: 'POST',
    headers: {
      authorization: auth,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new NetworkError(`${nsid} on ${pds} failed: ${res.status} ${text.slice(0, 300)}`);
  return text === '' ? undefined : (JSON.parse(text) as unknown);
}

/**
 * The DID of a handle (or a DID) of this network. Read from the PDSes' account databases, as their
 * operator can, since a PDS resolves no handle of an account it holds deactivated or taken down;
 * a PDS the account left still holds it under its old handle, so the DID document decides.
 */
export async function didOf(net: AttachedNetwork, account: string): Promise<string> {
  if (account.startsWith('did:')) return account;
  for (const p of net.pdses) {
    const db = new Database(path.join(p.dataDir, 'account.sqlite'), { readonly: true, fileMustExist: true });
    let row: { did: string } | undefined;
    try {
      row = db.prepare('SELECT did FROM actor WHERE handle = ?').get(account.toLowerCase()) as typeof row;
    } finally {
      db.close();
    }
    if (row === undefined) continue;
    const doc = await fetch(`${net.plcUrl}/${encodeURIComponent(row.did)}/data`);
    const data = doc.ok ? ((await doc.json()) as { alsoKnownAs?: string[] }) : {};
    if (data.alsoKnownAs?.includes(`at://${account.toLowerCase()}`) === true) return row.did;
  }
  throw new NetworkError(`${account} is no account of this network.`);
}

/** The PDS of the network an account lives on now. */
export async function homeOf(net: AttachedNetwork, did: string): Promise<NetworkPds> {
  const url = await pdsInDocument(net.plcUrl, did);
  const home = net.pdses.find((p) => p.url === url);
  if (home === undefined) throw new NetworkError(`${did} lives on ${url}, no PDS of this network.`);
  return home;
}

/**
 * Changes an account's state the way its user (deactivate, activate, a new handle) or its PDS's
 * operator (takedown, restore, delete, through the admin API) would; returns one line saying what
 * was done.
 */
export async function changeAccount(
  net: AttachedNetwork,
  account: string,
  password: string,
  action: AccountAction,
  newHandle?: string,
): Promise<string> {
  const did = await didOf(net, account);
  const home = await homeOf(net, did);
  const admin = `Basic ${Buffer.from(`admin:${home.adminPassword}`).toString('base64')}`;
  const user = async (): Promise<string> => {
    const session = (await post(home.url, 'com.atproto.server.createSession', '', {
      identifier: did,
      password,
    })) as { accessJwt: string };
    return `Bearer ${session.accessJwt}`;
  };
  const subject = { $type: 'com.atproto.admin.defs#repoRef', did };
  switch (action) {
    case 'deactivate':
      await post(home.url, 'com.atproto.server.deactivateAccount', await user(), {});
      return `${account} is deactivated on ${home.url}.`;
    case 'activate':
      await post(home.url, 'com.atproto.server.activateAccount', await user());
      return `${account} is active again on ${home.url}.`;
    case 'takedown':
      await post(home.url, 'com.atproto.admin.updateSubjectStatus', admin, {
        subject,
        takedown: { applied: true, ref: 'knotless dev' },
      });
      return `${account} is taken down by ${home.url}.`;
    case 'restore':
      await post(home.url, 'com.atproto.admin.updateSubjectStatus', admin, {
        subject,
        takedown: { applied: false },
      });
      return `${account}'s takedown on ${home.url} is lifted.`;
    case 'delete':
      await post(home.url, 'com.atproto.admin.deleteAccount', admin, { did });
      return `${account} (${did}) is deleted from ${home.url}.`;
    case 'handle':
      if (newHandle === undefined)
        throw new NetworkError('Name the new handle: knotless dev account <handle> handle <new-handle>.');
      await post(home.url, 'com.atproto.identity.updateHandle', await user(), { handle: newHandle });
      return `${account} is now ${newHandle} (${did}).`;
  }
}
