import fs from 'node:fs';
import path from 'node:path';
import type { BlobCache } from '../cache/blob-cache.ts';
import { Mirror } from '../cache/mirror.ts';
import { GitError, runGit } from '../git/run.ts';
import { loadPack, withRelist } from '../packs/transfer.ts';
import { KnotlessError } from '../errors.ts';
import { unionPacks, type PackEntry } from '../records/ref-record.ts';
import { safeText } from '../text/terminal.ts';
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
 * object the mirror lacks (a partial clone's lazy fetch of blobs). A pack of one large blob
 * (`holds` blob) is downloaded only for a request that wants that blob by its id or whose filter
 * does not leave it out (none, or a `blob:limit` above its size), and for a `--depth 1` fetch
 * only when the wanted commits' trees reach it.
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
      refs = await syncPacks(mirror, env, refs, STRUCTURE);
      whole = mirror.holdsAll(listOf(refs));
      await setRefs(mirror.gitDir, refs);
    });
    return new MirrorUploadPack(mirror, env, refs, whole);
  }

  /** Downloads into the mirror the packs it skipped that `pick` keeps, before a request that needs them. */
  async #fill(pick: Pick): Promise<void> {
    await this.#mirror.hold(async () => {
      const before = this.#refs;
      this.#refs = await syncPacks(this.#mirror, this.#env, before, pick);
      if (this.#refs !== before) await setRefs(this.#mirror.gitDir, this.#refs);
      this.#whole = this.#mirror.holdsAll(listOf(this.#refs));
    });
  }

  /**
   * The packs a request needs beyond the structure (see the class's comment), or undefined when the
   * structure is enough.
   */
  async #needs(request: Uint8Array): Promise<Pick | undefined> {
    const lines = pktLines(request);
    const command = lines.find((l) => l.startsWith('command='));
    if (command === 'command=ls-refs') return undefined;
    if (command !== 'command=fetch') return ALL;
    const filter = lines.find((l) => l.startsWith('filter '))?.slice('filter '.length);
    const wants = lines.flatMap((l) => (/^want [0-9a-f]{40}$/.test(l) ? [l.slice(5)] : []));
    const wanted = new Set(wants);
    const deepens = lines.filter((l) => /^deepen(?:-since|-not)? /.test(l));
    // `--depth 1` sends the wanted commits' trees and nothing older: of the large blobs, only those
    // these trees reach, which the structure the mirror holds names. Any other deepening walks
    // history whose trees the structure alone does not bound cheaply: every pack.
    let tipOnly: Set<string> | undefined;
    if (deepens.length > 0) {
      const single = deepens.length === 1 && deepens[0] === 'deepen 1' && !lines.includes('deepen-relative');
      if (!single || wants.length === 0 || this.#mirror.lacks(wants).length > 0) return ALL;
      tipOnly = await this.#reached(wants);
    }
    // A large blob's pack is needed when its blob is wanted by id, or the filter lets it through
    // (and, at depth 1, the tip's trees reach it).
    const largeFor =
      (skip: (size: number) => boolean): Pick =>
      (p) =>
        p.holds?.kind !== 'blob' ||
        wanted.has(p.holds.oid) ||
        (!skip(p.holds.blobSize) && (tipOnly === undefined || tipOnly.has(p.holds.oid)));
    if (filter !== undefined && /^(?:blob:none|tree:\d+)$/.test(filter)) {
      if (wants.length === 0 || this.#mirror.lacks(wants).length === 0) return undefined;
      return largeFor(() => true);
    }
    const limit = filter === undefined ? undefined : blobLimit(filter);
    // git's blob:limit=<n> leaves out every blob of n bytes or more.
    if (limit !== undefined) return largeFor((size) => size >= limit);
    return tipOnly === undefined ? ALL : largeFor(() => false);
  }

  /**
   * The blobs the trees of `commits` reach, present or not: the mirror holds every tree, and git
   * lists the blobs it lacks without fetching them (the mirror's promisor remote has no URL).
   */
  async #reached(commits: string[]): Promise<Set<string>> {
    const out = await this.#mirror.hold(() =>
      runGit(['rev-list', '--objects', '--no-walk', '--missing=print', '--stdin'], {
        gitDir: this.#mirror.gitDir,
        input: commits.join('\n') + '\n',
      }),
    );
    const oids = new Set<string>();
    for (const line of out.stdout.toString('utf8').split('\n')) {
      const m = /^\??([0-9a-f]{40})/.exec(line);
      if (m !== null) oids.add(m[1]!);
    }
    return oids;
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
    const needs = this.#whole ? undefined : await this.#needs(request);
    if (needs !== undefined) await this.#fill(needs);
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
        ).catch((err: unknown) => {
          // upload-pack refuses a request it cannot answer (a --shallow-exclude naming no ref, a
          // --shallow-since after every commit) with one `fatal:` line, as over any transport: git's
          // user gets that line, not a failure of knotless's own.
          const fatal = err instanceof GitError ? /^fatal: (.+)$/m.exec(err.stderr)?.[1] : undefined;
          if (fatal === undefined) throw err;
          throw new KnotlessError('usage', `git upload-pack refused the request: ${safeText(fatal)}.`, {
            cause: err,
          });
        });
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

/** Which packs of a ref's list a request needs in the mirror. */
type Pick = (p: PackEntry) => boolean;

const ALL: Pick = () => true;

/** The packs the mirror starts with: the structure, and packs that may hold anything. */
const STRUCTURE: Pick = (p) => p.holds === undefined || p.holds.kind === 'structure';

/**
 * The byte limit of a `blob:limit=<n>[kmg]` filter as git reads it (git_parse_ulong: k, m, g are
 * powers of 1024, either case), or undefined for any other filter.
 */
export function blobLimit(filter: string): number | undefined {
  const m = /^blob:limit=(\d+)([kmg]?)$/i.exec(filter);
  if (m === null) return undefined;
  const unit = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2]!.toLowerCase() as '' | 'k' | 'm' | 'g'];
  const n = Number(m[1]) * unit;
  return Number.isSafeInteger(n) ? n : undefined;
}

/** Every pack the refs list, in order. */
function listOf(refs: Map<string, RemoteRef>): PackEntry[] {
  return unionPacks([...refs.values()].map((r) => r.record.packs));
}

/**
 * Indexes into the mirror the packs of the refs it lacks that `pick` keeps. Should one of them lack
 * a base that only a skipped pack holds (a pack thin against blobs, written by a client before the
 * split into a repository pushed after it), every pack is indexed after all. Returns the refs, listed
 * again when a blob vanished mid-download.
 */
async function syncPacks(
  mirror: Mirror,
  env: UploadEnv,
  start: Map<string, RemoteRef>,
  pick: Pick,
): Promise<Map<string, RemoteRef>> {
  const { remote } = env;
  let refs = start;
  const load = (p: PackEntry) =>
    loadPack(remote.reader, remote.owner.did, p, env.cache, () => {}, env.maxObjectBytes);
  await withRelist(
    listOf(refs),
    async () => {
      refs = await env.relist();
      return listOf(refs);
    },
    async (list) => {
      const picked = list.filter(pick);
      if (picked.length === list.length) return mirror.sync(list, load);
      try {
        await mirror.sync(picked, load);
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
