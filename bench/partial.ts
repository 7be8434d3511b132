// `npm run bench:partial -- [--source DIR] [--lfs-mib 1] [--json FILE]`: a real repository pushed
// whole to the dev network, then cloned from a cold cache four ways (full, `--filter=blob:none`,
// `--depth 1`, `--filter=blob:limit=1m`), counting the bytes each clone downloaded from the PDS (the
// answers' bodies, at a proxy in front of it) and its requests; then an old commit is checked out of
// the blob:none clone, counting what its lazy fetch downloaded. Each is done the same way from the
// source over file:// in the same run, counting the pack bytes git itself sent. Writes `blobless_bytes_ratio`, `depth1_bytes_ratio`
// and `bloblimit_bytes_ratio` (each against the full clone), `split_structure_share` (the share of
// a structure pack beside a blob pack, both made by git from the same refs: what a blob:none clone
// should download, as pushes now split them), and `lfs_roundtrip_ok` from bench/lfs.ts run with a small
// file. `--source` defaults to this workspace's own repository.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startNetwork, startProxy } from 'knotless-devnet';
import { writeWrappers } from '../packages/knotless-devnet/src/dev/env-file.ts';
import { run as runCommand } from './client.ts';
import { localEnv } from './local.ts';

const { values } = parseArgs({
  options: {
    source: { type: 'string' },
    'lfs-mib': { type: 'string', default: '1' },
    json: { type: 'string' },
  },
});
const here = path.dirname(new URL(import.meta.url).pathname);
// git prints the common directory relative to where it ran (bench/) in the main work tree, and
// absolute in a linked one: resolved from there, both name it.
const source =
  values.source !== undefined
    ? path.resolve(values.source)
    : path.resolve(
        here,
        execFileSync('git', ['-C', here, 'rev-parse', '--git-common-dir'], { encoding: 'utf8' }).trim(),
      );
const lfsMib = Number(values['lfs-mib']);

/** Runs a command to completion and gives its stdout (the benches' runner, which fails loudly). */
const run = async (cmd: string, args: string[], cwd: string, env: Record<string, string>) =>
  (await runCommand(cmd, args, { cwd, env })).stdout;

/**
 * Waits until no background compaction of any repository holds its marker in `cacheDir`, for at
 * most ten minutes: a compaction that never ends is a failure of the bench, said as such.
 */
async function compactionsDone(cacheDir: string): Promise<void> {
  const dir = path.join(cacheDir, 'compacting');
  const until = Date.now() + 10 * 60_000;
  while (fs.existsSync(dir) && fs.readdirSync(dir).length > 0) {
    if (Date.now() > until) throw new Error(`a background compaction still holds ${dir} after ten minutes`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const home = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-bench-partial-'));
const net = await startNetwork();
const proxy = await startProxy({ target: net.pdsUrl });
try {
  const password = 'bench-password';
  await net.ensureAccount('alice.test', password);
  const bin = path.join(home, 'bin');
  writeWrappers(bin);
  // Each way of cloning has a cache of its own, so that each starts empty.
  const env = (cache: string): Record<string, string> => ({
    ...localEnv(home, bin, net),
    KNOTLESS_CACHE_DIR: path.join(home, cache),
    KNOTLESS_SERVICE: proxy.url,
    KNOTLESS_AGENT_IDLE: '0',
  });
  const pushEnv = env('cache-push');
  await run('knotless', ['login', 'alice.test', '--app-password', password], home, pushEnv);
  await run('knotless', ['repo', 'create', 'partial'], home, pushEnv);

  // A bare copy holds the source's branches and tags only, which a mirror push sends whole.
  const copy = path.join(home, 'source.git');
  await run('git', ['clone', '-q', '--bare', '--no-local', source, copy], home, pushEnv);
  const refs = (dir: string): Promise<string> =>
    run(
      'git',
      ['for-each-ref', '--format=%(objectname) %(refname)', 'refs/heads', 'refs/tags'],
      dir,
      pushEnv,
    );
  const sourceRefs = await refs(copy);
  const sourcePackBytes = Number(
    /size-pack: (\d+)/.exec(await run('git', ['count-objects', '-v'], copy, pushEnv))?.[1] ?? 0,
  );
  // What the split this bench is for would store, made by git itself from the same refs: the
  // structure (commits, trees, tags) and the blobs, each in a pack of its own.
  const packBytes = async (filter: string): Promise<number> => {
    const file = path.join(home, 'split.pack');
    const tips = sourceRefs
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split(' ')[0]!);
    // The pack goes straight to a file; the descriptor is this process's to close once git is done.
    const fd = fs.openSync(file, 'w');
    await new Promise<void>((resolve, reject) => {
      const child = spawn('git', ['pack-objects', '--revs', '-q', '--stdout', `--filter=${filter}`], {
        cwd: copy,
        env: pushEnv,
        stdio: ['pipe', fd, 'inherit'],
      });
      child.on('error', reject);
      child.on('close', (code) =>
        code === 0 ? resolve() : reject(new Error(`pack-objects exited ${code}`)),
      );
      child.stdin?.end(tips.join('\n') + '\n');
    }).finally(() => fs.closeSync(fd));
    const size = fs.statSync(file).size;
    fs.rmSync(file);
    return size;
  };
  const structureBytes = await packBytes('blob:none');
  const blobPackBytes = await packBytes('object:type=blob');
  const url = 'knotless://alice.test/partial';
  await run('git', ['push', '-q', '--mirror', url], copy, pushEnv);
  await compactionsDone(pushEnv['KNOTLESS_CACHE_DIR']!);

  // The reference: the same clones from the source copy over file://, whose upload-pack serves
  // filters and lazy fetches as the helper's mirror does.
  await run('git', ['config', 'uploadpack.allowFilter', 'true'], copy, pushEnv);
  await run('git', ['config', 'uploadpack.allowReachableSHA1InWant', 'true'], copy, pushEnv);
  /** The bytes of the packs in a repository; received packs are kept whole (transfer.unpackLimit=1). */
  const packsIn = (dir: string): number =>
    fs
      .readdirSync(path.join(dir, 'objects', 'pack'))
      .filter((f) => f.endsWith('.pack'))
      .reduce((n, f) => n + fs.statSync(path.join(dir, 'objects', 'pack', f)).size, 0);
  const keepPacks = ['-c', 'transfer.unpackLimit=1'];

  interface Measured {
    bytes: number;
    blobBytes: number;
    requests: number;
    blobRequests: number;
    gitBytes: number;
    dir: string;
    refDir: string;
  }
  /** One clone from a cold cache: the PDS's answers (bytes, requests, and the blobs among them). */
  const clone = async (name: string, args: string[]): Promise<Measured> => {
    const dir = path.join(home, `${name}.git`);
    const refDir = path.join(home, `${name}-ref.git`);
    proxy.reset();
    await run('git', [...keepPacks, 'clone', '-q', '--bare', ...args, url, dir], home, env(`cache-${name}`));
    const measured = {
      bytes: proxy.bytes(),
      blobBytes: proxy.bytes('com.atproto.sync.getBlob'),
      requests: proxy.count(),
      blobRequests: proxy.count('com.atproto.sync.getBlob'),
    };
    await run(
      'git',
      [...keepPacks, 'clone', '-q', '--bare', ...args, `file://${copy}`, refDir],
      home,
      pushEnv,
    );
    return { ...measured, gitBytes: packsIn(refDir), dir, refDir };
  };
  const full = await clone('full', []);
  if ((await refs(full.dir)) !== sourceRefs) throw new Error("partial bench: the full clone's refs differ");
  await run('git', ['fsck', '--no-progress'], full.dir, pushEnv);
  const blobless = await clone('blobless', ['--filter=blob:none']);
  const depth1 = await clone('depth1', ['--depth', '1', '--single-branch']);
  const bloblimit = await clone('bloblimit', ['--filter=blob:limit=1m']);

  // An old commit checked out of the blob:none clone: git fetches the blobs its tree needs in one
  // lazy fetch. The commit half way back along the default branch's first parents.
  const line = (await run('git', ['rev-list', '--first-parent', 'HEAD'], copy, pushEnv))
    .split('\n')
    .filter(Boolean);
  const old = line[Math.floor(line.length / 2)]!;
  const checkout = async (gitDir: string, cache: string): Promise<number> => {
    const work = fs.mkdtempSync(path.join(home, 'work-'));
    const before = packsIn(gitDir);
    await run(
      'git',
      [...keepPacks, `--git-dir=${gitDir}`, `--work-tree=${work}`, 'checkout', '-q', '--detach', old],
      home,
      env(cache),
    );
    fs.rmSync(work, { recursive: true, force: true });
    return packsIn(gitDir) - before;
  };
  proxy.reset();
  await checkout(blobless.dir, 'cache-blobless');
  const lazy: Measured = {
    bytes: proxy.bytes(),
    blobBytes: proxy.bytes('com.atproto.sync.getBlob'),
    requests: proxy.count(),
    blobRequests: proxy.count('com.atproto.sync.getBlob'),
    gitBytes: await checkout(blobless.refDir, 'cache-blobless'),
    dir: blobless.dir,
    refDir: blobless.refDir,
  };

  // The LFS round trip is bench/lfs.ts's own, with a small file.
  const lfsJson = path.join(home, 'lfs.json');
  await run(
    process.execPath,
    [path.join(here, 'lfs.ts'), '--mib', String(lfsMib), '--json', lfsJson],
    home,
    process.env as Record<string, string>,
  );
  const lfs = JSON.parse(fs.readFileSync(lfsJson, 'utf8')) as { lfs_roundtrip_ok: boolean };

  const ratio = (n: number): number => Math.round((n / full.bytes) * 1000) / 1000;
  const result = {
    source_pack_bytes: sourcePackBytes * 1024,
    full_bytes: full.bytes,
    full_blob_bytes: full.blobBytes,
    blobless_bytes: blobless.bytes,
    depth1_bytes: depth1.bytes,
    bloblimit_bytes: bloblimit.bytes,
    lazy_checkout_bytes: lazy.bytes,
    lazy_checkout_requests: lazy.requests,
    requests: {
      full: full.requests,
      blobless: blobless.requests,
      depth1: depth1.requests,
      bloblimit: bloblimit.requests,
      lazy_checkout: lazy.requests,
    },
    git_file_pack_bytes: {
      full: full.gitBytes,
      blobless: blobless.gitBytes,
      depth1: depth1.gitBytes,
      bloblimit: bloblimit.gitBytes,
      lazy_checkout: lazy.gitBytes,
    },
    blobless_bytes_ratio: ratio(blobless.bytes),
    depth1_bytes_ratio: ratio(depth1.bytes),
    bloblimit_bytes_ratio: ratio(bloblimit.bytes),
    split_structure_pack_bytes: structureBytes,
    split_blob_pack_bytes: blobPackBytes,
    split_structure_share: Math.round((structureBytes / (structureBytes + blobPackBytes)) * 1000) / 1000,
    lfs_roundtrip_ok: lfs.lfs_roundtrip_ok,
  };
  const count = (await run('git', ['rev-list', '--all', '--count'], copy, pushEnv)).trim();
  console.log(
    `knotless partial-clone bench, ${new Date().toISOString()}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown cpu'}, Node ${process.version}, load ${os.loadavg()[0]!.toFixed(1)}`,
  );
  console.log(
    `${process.env['KNOTLESS_PACK_SPLIT'] === undefined ? '' : `KNOTLESS_PACK_SPLIT=${process.env['KNOTLESS_PACK_SPLIT']} `}npm run bench:partial -- ${process.argv.slice(2).join(' ')}`,
  );
  console.log(
    `source: ${sourceRefs.split('\n').filter(Boolean).length} refs, ${count} commits, ${sourcePackBytes} KiB packed`,
  );
  console.log(
    '| clone (bare, cold cache) | bytes from the PDS | of which blobs | ratio to full | requests (getBlob) | git over file://: pack bytes |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const [label, r] of [
    ['full', full],
    ['--filter=blob:none', blobless],
    ['--depth 1 --single-branch', depth1],
    ['--filter=blob:limit=1m', bloblimit],
    [`checkout of ${old.slice(0, 12)} in the blob:none clone`, lazy],
  ] as const) {
    console.log(
      `| ${label} | ${r.bytes} | ${r.blobBytes} | ${ratio(r.bytes)} | ${r.requests} (${r.blobRequests}) | ${r.gitBytes} |`,
    );
  }
  console.log(
    `split by git pack-objects: structure ${structureBytes} bytes, blobs ${blobPackBytes} bytes (structure ${result.split_structure_share} of the two)`,
  );
  console.log(`LFS round trip (${lfsMib} MiB): ${lfs.lfs_roundtrip_ok ? 'ok' : 'FAILED'}`);
  if (values.json !== undefined) fs.writeFileSync(values.json, JSON.stringify(result, null, 2) + '\n');
  if (!lfs.lfs_roundtrip_ok) process.exitCode = 1;
} finally {
  await proxy.close();
  await net.close();
  fs.rmSync(home, { recursive: true, force: true });
}
