import assert from 'node:assert/strict';
import os from 'node:os';
import path from 'node:path';
import type { Run } from './cli.ts';
import type { TestNet } from './network.ts';

/** A working directory that never exists (see its use in the forge tests). */
export const NO_CLONE = path.join(os.tmpdir(), 'knotless-forge-no-clone-yet', String(process.pid));

/** A session on the test PDS, for writing straight to an account. */
async function sessionOf(t: TestNet, handle: string): Promise<{ accessJwt: string; did: string }> {
  const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.server.createSession`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: handle, password: t.password }),
  });
  return (await res.json()) as { accessJwt: string; did: string };
}

/** Deletes a record straight from an account (an interrupted or hand-made state). */
export async function deleteRaw(t: TestNet, handle: string, collection: string, rkey: string): Promise<void> {
  const session = await sessionOf(t, handle);
  const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.repo.deleteRecord`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${session.accessJwt}` },
    body: JSON.stringify({ repo: session.did, collection, rkey }),
  });
  assert.equal(res.status, 200, await res.text());
}

/** Writes a record straight into an account, as a hostile or hand-written client could. */
export async function writeRaw(
  t: TestNet,
  handle: string,
  collection: string,
  record: Record<string, unknown>,
): Promise<string> {
  const pds = t.net.pdsUrl;
  const session = await sessionOf(t, handle);
  const res = await fetch(`${pds}/xrpc/com.atproto.repo.createRecord`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${session.accessJwt}` },
    body: JSON.stringify({ repo: session.did, collection, record: { $type: collection, ...record } }),
  });
  const body = (await res.json()) as { uri: string };
  assert.equal(res.status, 200, JSON.stringify(body));
  return body.uri;
}

/** The JSON a `--json` command printed, after checking it succeeded. */
export function json<T = Record<string, unknown>>(res: Run): T {
  assert.equal(res.code, 0, res.stderr);
  return JSON.parse(res.stdout) as T;
}
