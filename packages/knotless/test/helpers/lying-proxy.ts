// A proxy between a reader and its PDS that lies: every request is forwarded, and the answer to a
// read may be replaced by the test's `lie` before the reader sees it (a changed record, an older
// answer replayed, another account's answer, a record left out, a blob's bytes changed). With
// `recording` on, every read's answer is kept by its path, so that a later lie can replay it.
import http from 'node:http';
import crypto from 'node:crypto';
import { decodeAll, encode } from '@atproto/lex-cbor';
import { CID } from 'multiformats/cid';
import { create as createDigest } from 'multiformats/hashes/digest';
import { varint } from 'multiformats';

/** One read as the proxy saw it. */
export interface Asked {
  nsid: string | undefined;
  /** The path with its query, as the reader sent it. */
  path: string;
  params: URLSearchParams;
}

/**
 * What the test does to one read: a new answer (status 200 unless said), `forward` to send it on
 * as asked, or a path to ask the PDS instead (the answer then comes from that request).
 */
export type Lie = (asked: Asked, answers: Map<string, Buffer>) => LieOutcome;
export type LieOutcome =
  | { kind: 'forward' }
  | { kind: 'instead'; path: string }
  | { kind: 'answer'; body: Buffer; contentType: string }
  | { kind: 'rewrite'; rewrite: (body: Buffer, contentType: string) => Buffer };

export interface LyingProxy {
  url: string;
  /** The lie now told; undefined tells none. */
  lie: Lie | undefined;
  /** Keeps every read's answer by its path while on. */
  recording: boolean;
  /** The answers kept while recording, by path. */
  answers: Map<string, Buffer>;
  /** How many answers a lie changed since the last reset. */
  lies: number;
  close(): Promise<void>;
}

export async function startLyingProxy(target: string): Promise<LyingProxy> {
  const state: LyingProxy = {
    url: '',
    lie: undefined,
    recording: false,
    answers: new Map(),
    lies: 0,
    close: async () => {},
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const path = req.url ?? '/';
        const params = new URLSearchParams(path.split('?')[1] ?? '');
        const nsid = path.startsWith('/xrpc/') ? path.slice(6).split('?')[0] : undefined;
        const outcome: LieOutcome =
          req.method === 'GET' && state.lie !== undefined
            ? state.lie({ nsid, path, params }, state.answers)
            : { kind: 'forward' };
        if (outcome.kind === 'answer') {
          state.lies++;
          res.writeHead(200, { 'content-type': outcome.contentType }).end(outcome.body);
          return;
        }
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(req.headers))
          if (typeof v === 'string' && !['host', 'connection'].includes(k)) headers[k] = v;
        // A connection of its own per request: no reuse of one the PDS may be closing.
        const up = await new Promise<http.IncomingMessage>((resolve, reject) => {
          const u = new URL(outcome.kind === 'instead' ? outcome.path : path, target);
          const r = http.request(
            {
              hostname: u.hostname,
              port: u.port,
              path: u.pathname + u.search,
              method: req.method,
              headers,
              agent: false,
            },
            resolve,
          );
          r.on('error', reject);
          r.end(Buffer.concat(chunks));
        });
        const got: Buffer[] = [];
        for await (const c of up) got.push(c as Buffer);
        let body: Buffer = Buffer.concat(got);
        const type = up.headers['content-type'] ?? 'application/octet-stream';
        const status = up.statusCode ?? 502;
        if (req.method === 'GET' && state.recording && status === 200) state.answers.set(path, body);
        if (outcome.kind === 'instead') state.lies++;
        if (outcome.kind === 'rewrite' && status === 200) {
          body = outcome.rewrite(body, type);
          state.lies++;
        }
        const out: Record<string, string> = { 'content-type': type };
        for (const name of [
          'ratelimit-limit',
          'ratelimit-remaining',
          'ratelimit-reset',
          'retry-after',
          'dpop-nonce',
        ])
          if (typeof up.headers[name] === 'string') out[name] = up.headers[name];
        res.writeHead(status, out).end(body);
      })().catch((err: unknown) => {
        res.writeHead(502, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: 'BadGateway', message: String(err) }));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  state.url = `http://127.0.0.1:${port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return state;
}

/** A CAR's root and blocks, in order. */
export function readCar(buf: Uint8Array): { root: CID; blocks: Array<[CID, Uint8Array]> } {
  const [headerLength, a] = varint.decode(buf);
  const header = [...decodeAll(buf.subarray(a, a + headerLength))][0] as { roots: unknown[] };
  const blocks: Array<[CID, Uint8Array]> = [];
  for (let at = a + headerLength; at < buf.length;) {
    const [length, read] = varint.decode(buf, at);
    const [cid, data] = CID.decodeFirst(buf.subarray(at + read, at + read + length));
    blocks.push([cid, data]);
    at += read + length;
  }
  return { root: CID.asCID(header.roots[0])!, blocks };
}

export function writeCar(root: CID, blocks: Array<[CID, Uint8Array]>): Buffer {
  const parts: Uint8Array[] = [];
  const header = encode({ version: 1, roots: [root] } as never);
  parts.push(varint.encodeTo(header.length, new Uint8Array(varint.encodingLength(header.length))), header);
  for (const [cid, data] of blocks) {
    const length = cid.bytes.length + data.length;
    parts.push(varint.encodeTo(length, new Uint8Array(varint.encodingLength(length))), cid.bytes, data);
  }
  return Buffer.concat(parts);
}

function cidOf(bytes: Uint8Array): CID {
  return CID.createV1(0x71, createDigest(0x12, crypto.createHash('sha256').update(bytes).digest()));
}

function replaceLinks(value: unknown, map: Map<string, CID>): unknown {
  const cid = CID.asCID(value);
  if (cid !== null) return map.get(cid.toString()) ?? cid;
  if (value instanceof Uint8Array) return value;
  if (Array.isArray(value)) return value.map((v) => replaceLinks(v, map));
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replaceLinks(v, map)]));
  return value;
}

/**
 * A proof (a getRecord CAR) with one record changed as a proxy would change it if it did its best:
 * the record block `change` alters is given its true new CID, and every block that links to it (the
 * tree's nodes up to the commit) is rewritten with the new links and its own new CID, so every
 * block matches its CID and the tree leads to the changed record. Only the commit's signature, which
 * the proxy cannot make, no longer holds.
 */
export function forgeProof(car: Uint8Array, change: (record: Record<string, unknown>) => boolean): Buffer {
  const { root, blocks } = readCar(car);
  const map = new Map<string, CID>();
  let out = blocks.map(([cid, data]): [CID, Uint8Array] => {
    const value = [...decodeAll(data)][0] as Record<string, unknown>;
    if (value === null || typeof value !== 'object' || !change(value)) return [cid, data];
    const bytes = encode(value as never);
    const next = cidOf(bytes);
    map.set(cid.toString(), next);
    return [next, bytes];
  });
  if (map.size === 0) throw new Error('the proof holds no record the change applies to');
  // Links up the tree, until nothing changes.
  for (let changed = true; changed;) {
    changed = false;
    out = out.map(([cid, data]): [CID, Uint8Array] => {
      if (map.has(cid.toString())) return [cid, data];
      const value = [...decodeAll(data)][0];
      const bytes = encode(replaceLinks(value, map) as never);
      if (Buffer.compare(Buffer.from(bytes), Buffer.from(data)) === 0) return [cid, data];
      const next = cidOf(bytes);
      map.set(cid.toString(), next);
      changed = true;
      return [next, bytes];
    });
  }
  return writeCar(map.get(root.toString()) ?? root, out);
}
