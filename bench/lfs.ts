// `npm run bench:lfs -- [--mib 200] [--limit 50000000] [--json FILE]`: one Git LFS file pushed and
// cloned on the dev network, its PDS's blob limit at bsky.social's 50 MB: the wall time of the push
// and of the clone, the requests each sent to the PDS (counted at a proxy in front of it), and
// whether the clone's file is the pushed one (`lfs_roundtrip_ok`). With `--kill-halfway`, a second
// file of the same size is pushed to another repository and the push is killed (SIGKILL, its whole
// process group: git, git-lfs and the transfer agent) once the PDS has acknowledged blobs holding half
// its bytes; the push run again must send only the blobs that had not landed, and the clone must be
// the file (`lfs_resume_*` in the JSON).
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
    'kill-halfway': { type: 'boolean', default: false },
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

/** Writes `mib` MiB of random bytes to `file`, a MiB at a time; answers their SHA-256. */
function randomFile(file: string): string {
  // Random bytes: nothing compresses, and the bench's memory stays small.
  const hash = crypto.createHash('sha256');
  const fd = fs.openSync(file, 'w');
  for (let i = 0; i < mib; i++) {
    const piece = crypto.randomBytes(1024 * 1024);
    hash.update(piece);
    fs.writeSync(fd, piece);
  }
  fs.closeSync(fd);
  return hash.digest('hex');
}

/** The SHA-256 of a file, read as a stream. */
async function sha256Of(file: string): Promise<string> {
  const got = crypto.createHash('sha256');
  for await (const piece of fs.createReadStream(file)) got.update(piece as Buffer);
  return got.digest('hex');
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
  const oid = randomFile(path.join(work, 'big.bin'));
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
  const ok = (await sha256Of(path.join(out, 'c', 'big.bin'))) === oid;
  const resume = values['kill-halfway'] ? await killHalfway() : undefined;

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
    ...resume,
  };
  console.log(
    `knotless LFS bench, ${new Date().toISOString()}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown cpu'}, Node ${process.version}, load ${os.loadavg()[0]!.toFixed(1)}`,
  );
  console.log(`npm run bench:lfs -- ${process.argv.slice(2).join(' ')}`);
  console.log(
    `| ${mib} MiB LFS file, blob limit ${limit} | push ${pushMs} ms, ${pushRequests} requests (${pushUploads} blob uploads) | clone ${cloneMs} ms, ${cloneRequests} requests (${cloneBlobs} blob downloads) | round trip ${ok ? 'ok' : 'FAILED'} |`,
  );
  if (resume !== undefined)
    console.log(
      `| killed with ${resume.lfs_resume_landed_before_kill} of ${resume.lfs_resume_blobs} blobs acknowledged, ${resume.lfs_resume_listed_before_kill} listed | push again ${resume.lfs_resume_push_ms} ms, ${resume.lfs_resume_blob_uploads} blob uploads, ${resume.lfs_resume_resent} re-sent that had landed | round trip ${resume.lfs_resume_roundtrip_ok ? 'ok' : 'FAILED'} |`,
    );
  if (values.json !== undefined) fs.writeFileSync(values.json, JSON.stringify(result, null, 2) + '\n');
  if (!ok || (resume !== undefined && (!resume.lfs_resume_roundtrip_ok || resume.lfs_resume_resent !== 0)))
    process.exitCode = 1;

  /**
   * Pushes a second file of the same size to a repository of its own, killing the push once the PDS
   * has acknowledged blobs holding half its bytes, then pushes again and clones.
   */
  async function killHalfway() {
    await run('knotless', ['repo', 'create', 'big-lfs-killed'], home, env);
    const dir = path.join(home, 'killed');
    fs.mkdirSync(dir);
    await run('git', ['init', '-q', '-b', 'main'], dir, env);
    await run('git', ['remote', 'add', 'origin', 'knotless://alice.test/big-lfs-killed'], dir, env);
    await run('knotless', ['lfs', 'install'], dir, env);
    await run('git', ['lfs', 'track', '*.bin'], dir, env);
    const oid2 = randomFile(path.join(dir, 'big.bin'));
    await run('git', ['add', '-A'], dir, env);
    await run('git', ['commit', '-q', '-m', 'big'], dir, env);
    // A public repository's blobs are each the limit's size but the last.
    const blobs = Math.ceil((mib * 1024 * 1024) / limit);
    const half = Math.ceil((mib * 1024 * 1024) / 2 / limit);
    const acknowledged = () =>
      proxy.requests.filter((r) => r.nsid === 'com.atproto.repo.uploadBlob' && r.status === 200).length;
    proxy.reset();
    const push = spawn('git', ['push', '-q', 'origin', 'main'], {
      cwd: dir,
      env,
      stdio: 'ignore',
      detached: true,
    });
    const exited = new Promise<void>((resolve) => push.on('close', () => resolve()));
    let killed = false;
    await new Promise<void>((resolve) => {
      const poll = setInterval(() => {
        if (acknowledged() >= half) {
          clearInterval(poll);
          process.kill(-push.pid!, 'SIGKILL');
          killed = true;
          resolve();
        }
      }, 5);
      void exited.then(() => (clearInterval(poll), resolve()));
    });
    await exited;
    if (!killed) throw new Error('the push ended before half of its blobs landed: nothing was killed');
    const landed = acknowledged();
    const listing = (await (
      await fetch(
        `${net.pdsUrl}/xrpc/com.atproto.repo.listRecords?repo=alice.test&collection=dev.knotless.lfs&limit=100`,
      )
    ).json()) as { records: Array<{ value: { oid?: string; blobs?: unknown[] } }> };
    const listed = listing.records.find((r) => r.value.oid === oid2)?.value.blobs?.length ?? 0;

    proxy.reset();
    const start = performance.now();
    await run('git', ['push', '-q', 'origin', 'main'], dir, env);
    const again = Math.round(performance.now() - start);
    const uploads = proxy.count('com.atproto.repo.uploadBlob');
    const out2 = path.join(home, 'out-killed');
    fs.mkdirSync(out2);
    await run('git', ['clone', '-q', 'knotless://alice.test/big-lfs-killed', 'c'], out2, env);
    return {
      lfs_resume_blobs: blobs,
      lfs_resume_landed_before_kill: landed,
      lfs_resume_listed_before_kill: listed,
      lfs_resume_push_ms: again,
      lfs_resume_blob_uploads: uploads,
      // Blobs the second push sent beyond those that had not landed before the kill.
      lfs_resume_resent: uploads - (blobs - landed),
      lfs_resume_roundtrip_ok: (await sha256Of(path.join(out2, 'c', 'big.bin'))) === oid2,
    };
  }
} finally {
  await proxy.close();
  await net.close();
  fs.rmSync(home, { recursive: true, force: true });
}
