import fs from 'node:fs';
import path from 'node:path';
import type { BlobCache } from '../cache/blob-cache.ts';
import { Mirror } from '../cache/mirror.ts';
import { runGit } from '../git/run.ts';
import { loadPack, withRelist } from '../packs/transfer.ts';
import { KnotlessError } from '../errors.ts';
import { unionPacks, type PackEntry } from '../records/ref-record.ts';
import type { RemoteRef, RemoteRepo } from '../records/remote-repo.ts';

/** What serving git's upload-pack from a repository's mirror works with (made by the helper). */
export interface UploadEnv {
  remote: RemoteRepo;
  cacheDir: string;
  cache: BlobCache;
  /** The refs as listed, by name (HEAD included). */
  refs: Map<string, RemoteRef>;
  /** Lists the refs again (after a blob vanished mid-download). */
  relist: () => Promise<Map<string, RemoteRef>>;
  maxObjectBytes: number;
}

/**
 * git's upload-pack, protocol v2, over the repository's mirror in the cache folder (cache/mirror.ts):
 * shallow (`deepen`, `deepen-since`, `deepen-not`) and partial (`filter`) fetches, and a partial
 * clone's lazy fetches, answered by git's own code rather than by knotless, which only stores packs.
 * Each answer runs `git upload-pack --stateless-rpc` on one request, as a smart-HTTP server does.
 *
 * The mirror is a promisor repository (format.md, "How the helper's mirror serves a partial clone"):
 * it starts with the packs that hold the structure (commits, trees, tags: `holds` structure, or no
 * `holds`, as every pack before the split), and downloads the rest only before a request that needs
 * it — a fetch without a `blob:none` or `tree:<n>` filter, one that deepens, or one that wants an
 * object the mirror lacks (a partial clone's lazy fetch of blobs).
 */
export class MirrorUploadPack {
  readonly #mirror: Mirror;
  readonly #env: UploadEnv;
  #refs: Map<string, RemoteRef>;
  /** Whether every pack the refs list is in the mirror. */
  #whole: boolean;

  private constructor(mirror: Mirror, env: UploadEnv, refs: Map<string, RemoteRef>, whole: boolean) {
    this.#mirror = mirror;
    this.#env = env;
    this.#refs = refs;
    this.#whole = whole;
  }

  /**
   * Brings the mirror up to date with the refs: indexes the structure packs it lacks (downloaded,
   * or from the blob cache) and sets its refs to the listing's, those no longer listed deleted.
   */
  static async open(env: UploadEnv): Promise<MirrorUploadPack> {
    const { remote } = env;
    const mirror = new Mirror(env.cacheDir, remote.owner.did, remote.name);
    let refs = env.refs;
    let whole = false;
    await mirror.hold(async () => {
      await mirror.create();
      await mirror.makePromisor();
      refs = await syncPacks(mirror, env, refs, 'structure');
      whole = mirror.holdsAll(listOf(refs));
      await setRefs(mirror.gitDir, refs);
    });
    return new MirrorUploadPack(mirror, env, refs, whole);
  }

  /** Downloads into the mirror every pack it skipped, before a request that needs them. */
  async #wholeMirror(): Promise<void> {
    await this.#mirror.hold(async () => {
      const before = this.#refs;
      this.#refs = await syncPacks(this.#mirror, this.#env, before, 'all');
      if (this.#refs !== before) await setRefs(this.#mirror.gitDir, this.#refs);
    });
    this.#whole = true;
  }

  /** Whether a request needs more than the structure: see the class's comment. */
  #needsAll(request: Uint8Array): boolean {
    const lines = pktLines(request);
    const command = lines.find((l) => l.startsWith('command='));
    if (command === 'command=ls-refs') return false;
    if (command !== 'command=fetch') return true;
    const filter = lines.find((l) => l.startsWith('filter '))?.slice('filter '.length);
    if (filter === undefined || !/^(?:blob:none|tree:\d+)$/.test(filter)) return true;
    if (lines.some((l) => /^deepen(?:-since|-not)? /.test(l))) return true;
    const wants = lines.flatMap((l) => (/^want [0-9a-f]{40}$/.test(l) ? [l.slice(5)] : []));
    if (wants.length === 0) return false;
    return this.#mirror.lacks(wants).length > 0;
  }

  /** upload-pack's capability advertisement (protocol v2), as git reads it first. */
  async advertise(send: (bytes: Uint8Array) => void): Promise<void> {
    await this.#run(['--stateless-rpc', '--advertise-refs'], '', send);
  }

  /**
   * upload-pack's answer to one request (pkt-lines up to and including its flush), handed to `send`
   * a piece at a time.
   */
  async answer(request: Uint8Array, send: (bytes: Uint8Array) => void): Promise<void> {
    if (!this.#whole && this.#needsAll(request)) await this.#wholeMirror();
    await this.#run(['--stateless-rpc'], request, send);
  }

  /**
   * Runs upload-pack with its answer written to a file in the mirror (a private repository's objects
   * stay in the cache folder), then hands it on in pieces: memory does not grow with the pack.
   */
  async #run(args: string[], input: Uint8Array | string, send: (bytes: Uint8Array) => void): Promise<void> {
    const dir = this.#mirror.gitDir;
    await this.#mirror.hold(async () => {
      const file = path.join(dir, 'knotless', 'upload-answer');
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, '', { mode: 0o600 });
      try {
        await runGit(
          [
            // Partial clones and their later fetches: without it upload-pack ignores a filter.
            '-c',
            'uploadpack.allowFilter=true',
            // A lazy fetch asks for blobs by id: any object the refs reach may be asked for.
            '-c',
            'uploadpack.allowReachableSHA1InWant=true',
            // The mirror lacks the blobs it did not download: pack-objects leaves out what it lacks
            // (a blob:limit filter reads sizes) instead of stopping. Read from protected
            // configuration only, which the command line is.
            '-c',
            `uploadpack.packObjectsHook=${ALLOW_PROMISOR_HOOK}`,
            'upload-pack',
            ...args,
            dir,
          ],
          { gitDir: dir, input, stdoutFile: file, env: { GIT_PROTOCOL: 'version=2' } },
        );
        const fd = fs.openSync(file, 'r');
        try {
          const piece = Buffer.alloc(PIECE_BYTES);
          for (let n; (n = fs.readSync(fd, piece)) > 0;) send(Buffer.from(piece.subarray(0, n)));
        } finally {
          fs.closeSync(fd);
        }
      } finally {
        fs.rmSync(file, { force: true });
      }
    });
  }
}

/**
 * git runs the hook through the shell with the pack-objects command after it: this one runs that
 * command with `--missing=allow-promisor` added.
 */
const ALLOW_PROMISOR_HOOK = 'f() { "$@" --missing=allow-promisor; }; f';

/** Every pack the refs list, in order. */
function listOf(refs: Map<string, RemoteRef>): PackEntry[] {
  return unionPacks([...refs.values()].map((r) => r.record.packs));
}

/**
 * Indexes into the mirror the packs of the refs it lacks: those holding structure (and those that
 * may hold anything), or all. Should a structure pack lack a base that only a skipped pack holds (a
 * pack thin against blobs, written by a client before the split), every pack is indexed after all.
 * Returns the refs, listed again when a blob vanished mid-download.
 */
async function syncPacks(
  mirror: Mirror,
  env: UploadEnv,
  start: Map<string, RemoteRef>,
  which: 'structure' | 'all',
): Promise<Map<string, RemoteRef>> {
  const { remote } = env;
  let refs = start;
  const pick = (list: PackEntry[]) =>
    which === 'all' ? list : list.filter((p) => p.holds === undefined || p.holds.kind === 'structure');
  const load = (p: PackEntry) =>
    loadPack(remote.reader, remote.owner.did, p, env.cache, () => {}, env.maxObjectBytes);
  await withRelist(
    listOf(refs),
    async () => {
      refs = await env.relist();
      return listOf(refs);
    },
    async (list) => {
      if (which === 'all') return mirror.sync(list, load);
      try {
        await mirror.sync(pick(list), load);
      } catch (err) {
        if (!(err instanceof KnotlessError && err.code === 'corrupt-remote')) throw err;
        await mirror.sync(list, load);
      }
    },
    remote.label,
  );
  return refs;
}

/** The payloads of a request's pkt-lines (without their newline), flush and delimiter left out. */
function pktLines(request: Uint8Array): string[] {
  const bytes = Buffer.from(request.buffer, request.byteOffset, request.byteLength);
  const out: string[] = [];
  for (let at = 0; at + 4 <= bytes.length;) {
    const len = parseInt(bytes.toString('latin1', at, at + 4), 16);
    if (!(len >= 4)) {
      at += 4;
      continue;
    }
    out.push(bytes.toString('latin1', at + 4, at + len).replace(/\n$/, ''));
    at += len;
  }
  return out;
}

/** The size of the pieces an answer is handed on in. */
const PIECE_BYTES = 1024 * 1024;

/** Sets the mirror's refs to `refs` in one transaction; HEAD follows the listing's symbolic HEAD. */
async function setRefs(gitDir: string, refs: Map<string, RemoteRef>): Promise<void> {
  const now = (await runGit(['for-each-ref', '--format=%(refname)'], { gitDir })).stdout
    .toString('utf8')
    .split('\n')
    .filter(Boolean);
  const lines: string[] = [];
  for (const name of now) if (!refs.has(name)) lines.push(`delete ${name}`);
  for (const [name, ref] of refs) {
    if (name === 'HEAD' || ref.record.target === undefined) continue;
    lines.push(`update ${name} ${ref.record.target}`);
  }
  if (lines.length > 0)
    await runGit(['update-ref', '--stdin'], { gitDir, input: lines.map((l) => `${l}\n`).join('') });
  const head = refs.get('HEAD')?.record.symref;
  if (head !== undefined) await runGit(['symbolic-ref', 'HEAD', head], { gitDir });
}
