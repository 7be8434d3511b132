import assert from 'node:assert/strict';
import type { Run } from './cli.ts';
import type { TestNet } from './network.ts';

/** Writes a record straight into an account, as a hostile or hand-written client could. */
export async function writeRaw(
  t: TestNet,
  handle: string,
  collection: string,
  record: Record<string, unknown>,
): Promise<string> {
  const pds = t.net.pdsUrl;
  const session = (await (
    await fetch(`${pds}/xrpc/com.atproto.server.createSession`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: handle, password: t.password }),
    })
  ).json()) as { accessJwt: string; did: string };
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
