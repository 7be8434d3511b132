// `npm run bench:lfs -- [--mib 200] [--limit 50000000] [--json FILE]`: one Git LFS file pushed and
// cloned on the dev network, its PDS's blob limit at bsky.social's 50 MB: the wall time of the push
// and of the clone, the requests each sent to the PDS (counted at a proxy in front of it), and
// whether the clone's file is the pushed one (`lfs_roundtrip_ok`).
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startNetwork, startProxy } from 'knotless-devnet';
import { writeWrappers } from '../packages/knotless-devnet/src/dev/env-file.ts';
import { localEnv } from './local.ts';

const { values } = parseArgs({
  options: {
    mib: { type: 'string', default: '200' },
    limit: { type: 'string', default: '50000000' },
    json: { type: 'string' },
  },
});
const mib = Number(values.mib);
const limit = Number(values.limit);

/** Runs a command to completion; fails the bench on a non-zero exit, with its stderr. */
function run(cmd: string, args: string[], cwd: string, env: Record<string, string>): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(' ')} exited ${code}:\n${err}`)),
    );
  });
}

const home = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-bench-lfs-'));
const net = await startNetwork({ blobUploadLimit: limit });
const proxy = await startProxy({ target: net.pdsUrl });
try {
  const password = 'bench-password';
  await net.ensureAccount('alice.test', password);
  const bin = path.join(home, 'bin');
  writeWrappers(bin);
  const env: Record<string, string> = {
    ...localEnv(home, bin, net),
    KNOTLESS_SERVICE: proxy.url,
    KNOTLESS_AGENT_IDLE: '0',
  };
  await run('knotless', ['login', 'alice.test', '--app-password', password], home, env);
  await run('knotless', ['repo', 'create', 'big-lfs'], home, env);
  await run('git', ['lfs', 'install'], home, env);
  const work = path.join(home, 'work');
  fs.mkdirSync(work);
  await run('git', ['init', '-q', '-b', 'main'], work, env);
  await run('git', ['remote', 'add', 'origin', 'knotless://alice.test/big-lfs'], work, env);
  await run('knotless', ['lfs', 'install'], work, env);
  await run('git', ['lfs', 'track', '*.bin'], work, env);
  // Random bytes, written a MiB at a time: nothing compresses, and the bench's memory stays small.
  const file = path.join(work, 'big.bin');
  const hash = crypto.createHash('sha256');
  const fd = fs.openSync(file, 'w');
  for (let i = 0; i < mib; i++) {
    const piece = crypto.randomBytes(1024 * 1024);
    hash.update(piece);
    fs.writeSync(fd, piece);
  }
  fs.closeSync(fd);
  const oid = hash.digest('hex');
  await run('git', ['add', '-A'], work, env);
  await run('git', ['commit', '-q', '-m', 'big'], work, env);

  proxy.reset();
  let start = performance.now();
  await run('git', ['push', '-q', 'origin', 'main'], work, env);
  const pushMs = Math.round(performance.now() - start);
  const pushRequests = proxy.count();
  const pushUploads = proxy.count('com.atproto.repo.uploadBlob');

  proxy.reset();
  const out = path.join(home, 'out');
  fs.mkdirSync(out);
  start = performance.now();
  await run('git', ['clone', '-q', 'knotless://alice.test/big-lfs', 'c'], out, env);
  const cloneMs = Math.round(performance.now() - start);
  const cloneRequests = proxy.count();
  const cloneBlobs = proxy.count('com.atproto.sync.getBlob');
  const got = crypto.createHash('sha256');
  for await (const piece of fs.createReadStream(path.join(out, 'c', 'big.bin'))) got.update(piece as Buffer);
  const ok = got.digest('hex') === oid;

  const result = {
    lfs_mib: mib,
    lfs_blob_limit: limit,
    lfs_push_ms: pushMs,
    lfs_push_requests: pushRequests,
    lfs_push_blob_uploads: pushUploads,
    lfs_clone_ms: cloneMs,
    lfs_clone_requests: cloneRequests,
    lfs_clone_blob_downloads: cloneBlobs,
    lfs_roundtrip_ok: ok,
  };
  console.log(
    `knotless LFS bench, ${new Date().toISOString()}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown cpu'}, Node ${process.version}, load ${os.loadavg()[0]!.toFixed(1)}`,
  );
  console.log(`npm run bench:lfs -- ${process.argv.slice(2).join(' ')}`);
  console.log(
    `| ${mib} MiB LFS file, blob limit ${limit} | push ${pushMs} ms, ${pushRequests} requests (${pushUploads} blob uploads) | clone ${cloneMs} ms, ${cloneRequests} requests (${cloneBlobs} blob downloads) | round trip ${ok ? 'ok' : 'FAILED'} |`,
  );
  if (values.json !== undefined) fs.writeFileSync(values.json, JSON.stringify(result, null, 2) + '\n');
  if (!ok) process.exitCode = 1;
} finally {
  await proxy.close();
  await net.close();
  fs.rmSync(home, { recursive: true, force: true });
}
