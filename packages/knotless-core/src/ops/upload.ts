import fs from 'node:fs';
import path from 'node:path';
import type { BlobCache } from '../cache/blob-cache.ts';
import { Mirror } from '../cache/mirror.ts';
import { runGit } from '../git/run.ts';
import { loadPack, withRelist } from '../packs/transfer.ts';
import { unionPacks } from '../records/ref-record.ts';
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
 */
export class MirrorUploadPack {
  readonly #mirror: Mirror;

  private constructor(mirror: Mirror) {
    this.#mirror = mirror;
  }

  /**
   * Brings the mirror up to date with the refs: indexes the packs it lacks (downloaded, or from the
   * blob cache) and sets its refs to the listing's, those no longer listed deleted.
   */
  static async open(env: UploadEnv): Promise<MirrorUploadPack> {
    const { remote } = env;
    const mirror = new Mirror(env.cacheDir, remote.owner.did, remote.name);
    let refs = env.refs;
    const packsOf = () => unionPacks([...refs.values()].map((r) => r.record.packs));
    await mirror.hold(async () => {
      await withRelist(
        packsOf(),
        async () => {
          refs = await env.relist();
          return packsOf();
        },
        (list) =>
          mirror.sync(list, (p) =>
            loadPack(remote.reader, remote.owner.did, p, env.cache, () => {}, env.maxObjectBytes),
          ),
        remote.label,
      );
      await setRefs(mirror.gitDir, refs);
    });
    return new MirrorUploadPack(mirror);
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
