import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { after, describe, it } from 'node:test';
import { BlobCache } from '../../knotless-core/src/cache/blob-cache.ts';
import { KnotlessError } from '../../knotless-core/src/errors.ts';
import { ObjectInflater, inflateWhole } from '../../knotless-core/src/git/inflate.ts';
import { PackFile } from '../../knotless-core/src/git/pack-file.ts';
import { parsePackInfo } from '../../knotless-core/src/git/pack.ts';
import { runGit } from '../../knotless-core/src/git/run.ts';
import { cidForBlob } from '../../knotless-core/src/records/cid.ts';
import { loadPack } from '../../knotless-core/src/packs/transfer.ts';
import type { PackEntry } from '../../knotless-core/src/records/ref-record.ts';
import { XrpcClient } from '../../knotless-core/src/xrpc/client.ts';
import { HttpPool } from '../../knotless-core/src/xrpc/http-pool.ts';
import type { Transport } from '../../knotless-core/src/xrpc/transport.ts';
import { commitFiles, newRepo, repoMaker, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { waitUntil } from './helpers/wait.ts';

const dirs: string[] = [];
const tmp = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-stream-'));
  dirs.push(d);
  return d;
};
after(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

/** A real pack of one random file of `bytes` bytes, made by git. */
async function randomPack(bytes: number): Promise<Buffer> {
  const dir = tmp();
  await runGit(['init', '-q', '--bare', dir]);
  const file = path.join(dir, 'data.bin');
  fs.writeFileSync(file, crypto.randomBytes(bytes));
  const oid = (await runGit(['hash-object', '-w', file], { gitDir: dir })).stdout.toString().trim();
  return (await runGit(['pack-objects', '--stdout', '-q'], { gitDir: dir, input: `${oid}\n` })).stdout;
}

/** A transport over a real HTTP/1.1 client to a local server (no PDS needed for a getBlob). */
function localTransport(port: number): Transport {
  const pool = new HttpPool();
  return {
    request: (url, init) =>
      pool.request(
        { kind: 'tcp', host: '127.0.0.1', port, secure: false },
        { ...init, target: `${url.pathname}${url.search}`, headers: { host: url.host, ...init.headers } },
      ),
    close: () => pool.close(),
  };
}

/** Bytes of every file under `dir` (the blob cache's temporary files while a download runs). */
function bytesUnder(dir: string): number {
  if (!fs.existsSync(dir)) return 0;
  return fs.readdirSync(dir).reduce((n, f) => n + fs.statSync(path.join(dir, f)).size, 0);
}

describe('downloads stream to disk', () => {
  it('writes a blob to disk as it arrives, before its body has ended, and checks it as it streams', async () => {
    const pack = await randomPack(3 * 1024 * 1024);
    const cid = cidForBlob(pack);
    const info = parsePackInfo(pack);
    const cacheDir = tmp();
    const cache = new BlobCache(cacheDir);
    const half = Math.floor(pack.length / 2);
    let onDisk = -1;
    // The server sends half the blob, then waits until the client has written that half to disk.
    const server = http.createServer((req, res) => {
      res.writeHead(200, {
        'content-length': String(pack.length),
        'content-type': 'application/octet-stream',
      });
      res.write(pack.subarray(0, half));
      void waitUntil(
        'the first half of the blob on disk, before the rest is sent',
        () => {
          const n = bytesUnder(cache.tempDir);
          return n >= half ? n : undefined;
        },
        5,
      ).then((n) => {
        onDisk = n;
        res.end(pack.subarray(half));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const transport = localTransport(port);
    try {
      const reader = new XrpcClient(`http://127.0.0.1:${port}`, { transport });
      const entry: PackEntry = {
        id: info.id,
        size: pack.length,
        count: info.count,
        parts: [
          { $type: 'blob', ref: { $link: cid }, mimeType: 'application/octet-stream', size: pack.length },
        ],
      };
      const file = await loadPack(reader, 'did:plc:x', entry, cache, () => {});
      try {
        assert.ok(onDisk >= half, `only ${onDisk} of the first ${half} bytes were on disk mid-body`);
        assert.ok(file.read(0, file.length).equals(pack));
      } finally {
        file.close();
      }
      // Checked, then kept: the cache has it under its CID, and no temporary file is left.
      const cached = cache.open(cid);
      assert.ok(cached !== undefined);
      fs.closeSync(cached.fd);
      assert.equal(bytesUnder(cache.tempDir), 0);
    } finally {
      transport.close();
      server.close();
    }
  });

  it('refuses a blob that does not match its CID and keeps nothing of it', async () => {
    const pack = await randomPack(256 * 1024);
    const info = parsePackInfo(pack);
    const bad = Buffer.from(pack);
    bad[100] = bad[100]! ^ 0xff;
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-length': String(bad.length) });
      res.end(bad);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const transport = localTransport(port);
    const cache = new BlobCache(tmp());
    const cid = cidForBlob(pack);
    try {
      const reader = new XrpcClient(`http://127.0.0.1:${port}`, { transport });
      const entry: PackEntry = {
        id: info.id,
        size: pack.length,
        count: info.count,
        parts: [{ $type: 'blob', ref: { $link: cid }, mimeType: 'x', size: pack.length }],
      };
      await assert.rejects(
        loadPack(reader, 'did:plc:x', entry, cache, () => {}),
        (err: unknown) => err instanceof KnotlessError && /does not match its CID/.test(err.message),
      );
      assert.equal(cache.open(cid), undefined);
      assert.equal(bytesUnder(cache.tempDir), 0);
    } finally {
      transport.close();
      server.close();
    }
  });

  it('reads a pack made of several files as one, and streams it back in pieces', async () => {
    const pack = await randomPack(2 * 1024 * 1024 + 777);
    const dir = tmp();
    const cut = [0, 1000, 1_500_000, pack.length];
    const fds = cut.slice(1).map((end, i) => {
      const f = path.join(dir, `p${i}`);
      fs.writeFileSync(f, pack.subarray(cut[i], end));
      return { fd: fs.openSync(f, 'r'), size: end - cut[i]! };
    });
    const file = PackFile.fromFds(fds);
    try {
      assert.equal(file.length, pack.length);
      assert.ok(file.read(999, 2000).equals(pack.subarray(999, 2999)));
      const pieces: Buffer[] = [];
      for await (const p of file.chunks()) pieces.push(Buffer.from(p));
      assert.ok(pieces.length > 1);
      assert.ok(Buffer.concat(pieces).equals(pack));
    } finally {
      file.close();
    }
  });
});

/** The helper prints its peak memory on exit under KNOTLESS_TRACE (helper/main.ts). */
function peakMib(stderr: string): number {
  const m = /knotless: memory peak (\d+) MiB/.exec(stderr);
  assert.ok(m !== null, `no peak memory line in:\n${stderr}`);
  return Number(m[1]);
}

// Measured before streaming: 131 MiB for a 22 MiB pack, 526 MiB for 200 MiB. The helper
// now holds a piece of the pack at a time, whatever its size. A helper holding this pack whole would
// need Node's 45 MiB plus the pack's 64: over the push's limit. The clone is held to what a one-file
// clone peaks at in the same run plus less than the pack: its floor moves with what a command loads,
// and node:http's reads, each in a buffer of its own, wait for a collection.
const PACK_MIB = 64;
const LIMIT_MIB = 100;

describe('the helper does not hold a pack in memory', () => {
  const t = useNetwork(['alice.test']);
  let trace = false;
  const alice = useGitUser(t, 'alice.test', () => (trace ? { KNOTLESS_TRACE: '1' } : {}));
  const createRepo = repoMaker(alice, 'alice.test', 'stream');

  it(`pushes a ${PACK_MIB} MiB pack in under ${LIMIT_MIB} MiB of memory, and clones it cold in less than the pack over a one-file clone`, async () => {
    // What a clone of a one-file repository peaks at, in the same run: the helper's floor (Node, its
    // modules, the libraries a command loads). The big clone may add less than the pack's size to it.
    const small = await createRepo();
    const smallDir = await newRepo(alice, small);
    await commitFiles(alice, smallDir, { 'a.txt': 'a\n' }, 'small');
    await alice.ok(smallDir, 'push', '-q', 'origin', 'main');
    trace = true;
    const floor = peakMib((await alice.git(alice.dir(), 'clone', '-q', small, 's')).stderr);
    trace = false;
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    const files: Record<string, Uint8Array> = {};
    for (let i = 0; i < PACK_MIB; i++) files[`f${i}.bin`] = crypto.randomBytes(1024 * 1024);
    await commitFiles(alice, dir, files, 'random');
    trace = true;
    try {
      const push = await alice.git(dir, 'push', 'origin', 'main');
      assert.equal(push.code, 0, push.stderr);
      assert.ok(peakMib(push.stderr) <= LIMIT_MIB, `push peaked at ${peakMib(push.stderr)} MiB`);
      // A cold cache: every blob comes from the PDS.
      fs.rmSync(path.join(alice.env['KNOTLESS_CACHE_DIR']!, 'blobs'), { recursive: true, force: true });
      const out = alice.dir();
      const clone = await alice.git(out, 'clone', '-q', url, 'c');
      assert.equal(clone.code, 0, clone.stderr);
      // Holding the pack whole would add at least its own size to the floor.
      assert.ok(
        peakMib(clone.stderr) - floor < PACK_MIB,
        `clone peaked at ${peakMib(clone.stderr)} MiB, a one-file clone at ${floor}`,
      );
      assert.ok(fs.readFileSync(path.join(out, 'c', 'f7.bin')).equals(Buffer.from(files['f7.bin']!)));
    } finally {
      trace = false;
    }
  });
});

describe('the pack check inflates into one reused buffer', () => {
  it('answers as zlib.inflateSync does: sizes, bytes used, first bytes, short and damaged streams', () => {
    const inflater = new ObjectInflater();
    try {
      const cases: Array<{ input: Buffer; max: number }> = [];
      for (const size of [0, 1, 1000, 64 * 1024, 3 * 64 * 1024, 200_001]) {
        const data = crypto.randomBytes(size);
        const z = zlib.deflateSync(data);
        cases.push({ input: z, max: size });
        // Followed by the next object's bytes: only the stream's own are used.
        cases.push({ input: Buffer.concat([z, crypto.randomBytes(50)]), max: size });
        // Cut short: more input is needed.
        cases.push({ input: z.subarray(0, Math.max(1, z.length - 10)), max: size });
        // Larger than declared: refused.
        if (size > 0) cases.push({ input: z, max: size - 1 });
      }
      cases.push({ input: crypto.randomBytes(100), max: 1000 });
      for (const [i, c] of cases.entries()) {
        const a = inflater.inflate(c.input, c.max);
        const b = inflateWhole(c.input, c.max);
        assert.deepEqual(a, b, `case ${i}`);
      }
      assert.equal(inflater.inflate(zlib.deflateSync(Buffer.alloc(10)).subarray(0, 5), 10), 'short');
    } finally {
      inflater.close();
    }
  });
});
