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
  async advertise(): Promise<Buffer> {
    return this.#run(['--stateless-rpc', '--advertise-refs'], '');
  }

  /** upload-pack's answer to one request (pkt-lines up to and including its flush). */
  async answer(request: Uint8Array): Promise<Buffer> {
    return this.#run(['--stateless-rpc'], request);
  }

  async #run(args: string[], input: Uint8Array | string): Promise<Buffer> {
    const dir = this.#mirror.gitDir;
    return this.#mirror.hold(
      async () =>
        (
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
            { gitDir: dir, input, env: { GIT_PROTOCOL: 'version=2' } },
          )
        ).stdout,
    );
  }
}

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
