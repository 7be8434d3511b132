import { BlobCache } from '../cache/blob-cache.ts';
import type { Context } from '../context.ts';
import { KnotlessError } from '../errors.ts';
import { RemoteRepo, type RemoteRef } from '../remote/remote-repo.ts';
import type { Chatter } from './progress.ts';
import type { KnotlessUrl } from './url.ts';

/** Options git set with `option`. */
export interface HelperOptions extends Chatter {
  dryRun: boolean;
  atomic: boolean;
  /** `--force-with-lease` expectations: ref → expected oid (all zeros: must not exist). */
  cas: Map<string, string>;
}

/** Everything one helper process knows: where the remote is, what git asked, what was listed. */
export class HelperState {
  readonly ctx: Context;
  readonly url: KnotlessUrl;
  readonly options: HelperOptions = {
    verbosity: 1,
    progress: false,
    dryRun: false,
    atomic: false,
    cas: new Map(),
  };
  readonly cache: BlobCache;
  #remote: RemoteRepo | undefined;
  /** The refs as last listed, by name (HEAD included). */
  refs: Map<string, RemoteRef> | undefined;

  constructor(ctx: Context, url: KnotlessUrl) {
    this.ctx = ctx;
    this.url = url;
    this.cache = new BlobCache(ctx.config.cacheDir);
  }

  /** The remote repository, resolving its owner on first use (from the identity cache when fresh). */
  async remote(): Promise<RemoteRepo> {
    if (this.#remote === undefined) {
      const owner = await this.ctx.resolver.resolve(this.url.owner);
      this.#remote = new RemoteRepo(this.ctx, owner, this.url.repo, (m) =>
        process.stderr.write(`knotless: warning: ${m}\n`),
      );
    }
    return this.#remote;
  }

  /** Lists the refs (one request per 100); an empty listing also checks that the repository exists. */
  async list(): Promise<Map<string, RemoteRef>> {
    const remote = await this.remote();
    const refs = await remote.listRefs();
    if (refs.length === 0 && !(await remote.exists())) {
      throw new KnotlessError(
        'repo-missing',
        `${remote.label} does not exist; create it with \`knotless repo create ${remote.name}\` (as its owner) and try again.`,
      );
    }
    this.refs = new Map(refs.map((r) => [r.record.ref, r]));
    return this.refs;
  }
}
