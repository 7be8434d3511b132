import type { TestNet } from './network.ts';

/**
 * Everything an account publishes: its repository as a CAR (every record), and every blob; `pds`
 * is the account's (the network's first unless given).
 */
export async function accountBytes(
  t: TestNet,
  did: string,
  pds = t.net.pdsUrl,
): Promise<{ car: Buffer; blobs: Buffer[] }> {
  const base = pds;
  const carRes = await fetch(`${base}/xrpc/com.atproto.sync.getRepo?did=${encodeURIComponent(did)}`);
  if (!carRes.ok) throw new Error(`getRepo: ${carRes.status}`);
  const car = Buffer.from(await carRes.arrayBuffer());
  const cids: string[] = [];
  for (let cursor: string | undefined; ;) {
    const q = new URLSearchParams({ did, limit: '1000', ...(cursor === undefined ? {} : { cursor }) });
    const res = await fetch(`${base}/xrpc/com.atproto.sync.listBlobs?${q}`);
    if (!res.ok) throw new Error(`listBlobs: ${res.status}`);
    const page = (await res.json()) as { cids: string[]; cursor?: string };
    cids.push(...page.cids);
    if (page.cursor === undefined || page.cids.length === 0) break;
    cursor = page.cursor;
  }
  const blobs: Buffer[] = [];
  for (const cid of cids) {
    const res = await fetch(
      `${base}/xrpc/com.atproto.sync.getBlob?did=${encodeURIComponent(did)}&cid=${cid}`,
    );
    if (!res.ok) throw new Error(`getBlob ${cid}: ${res.status}`);
    blobs.push(Buffer.from(await res.arrayBuffer()));
  }
  return { car, blobs };
}
