import fs from 'node:fs';
import path from 'node:path';
import {
  BlobCache,
  BlobGone,
  GitError,
  IndexedPacks,
  XrpcClient,
  indexPack,
  isKnotlessError,
  loadPack,
  runGit,
  unionPacks,
  withRelist,
  type PackEntry,
  type Transport,
} from 'knotless-core';
import type { ServeConfig } from '../config.ts';
import type { Index, RefRow } from '../db/index-store.ts';
import type { Identities } from '../ingest/identities.ts';
import { guardedTransport } from './guard.ts';
import type { Round } from '../ingest/forge-records.ts';
import { refsChanged } from './ref-cache.ts';
import { loadRoundPack, RoundUnavailable } from './round-packs.ts';

/** Thrown when a repository's packs exceed the configured bounds. */
export class MirrorLimit extends Error {
  override name = 'MirrorLimit';
}

/** The pack list stored in the index, back to PackEntry form (inline bytes as a Buffer). */
export function packsOf(row: Pick<RefRow, 'packs'>): PackEntry[] {
  const raw = JSON.parse(row.packs) as (Omit<PackEntry, 'inline'> & { inline?: { $bytes: string } })[];
  return raw.map((p) => ({
    id: p.id,
    size: p.size,
    count: p.count,
    ...(p.inline === undefined ? {} : { inline: Buffer.from(p.inline.$bytes, 'base64') }),
    ...(p.parts === undefined ? {} : { parts: p.parts }),
  }));
}

/** A directory name for a DID: only characters safe in a path, reversible enough to read. */
function didDir(did: string): string {
  return did.replace(/[^A-Za-z0-9.-]/g, (c) => `_${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

/**
 * Local bare repositories that mirror what the index says each repository's refs are. Packs come
 * from the owner's PDS through the knotless library (blob CIDs and pack checksums verified), are
 * indexed in record order with `index-pack --fix-thin`, then the refs are set to match the records.
 * Syncs of one repository never overlap; a sync asked for while one runs runs once more after it.
 */
export class Mirror {
  readonly root: string;
  readonly #config: ServeConfig;
  readonly #index: Index;
  readonly #identities: Identities;
  readonly #log: (line: string) => void;
  readonly #transport: Transport;
  readonly #cache: BlobCache;
  readonly #running = new Map<string, Promise<void>>();
  readonly #again = new Set<string>();
  readonly #rounds = new Map<string, Promise<void>>();

  constructor(config: ServeConfig, index: Index, identities: Identities, log: (line: string) => void) {
    this.#config = config;
    this.#index = index;
    this.#identities = identities;
    this.#log = log;
    this.root = path.join(config.dataDir, 'git');
    this.#transport = guardedTransport(config.dev, {
      totalMs: config.fetchTimeoutMs,
      idleMs: config.fetchIdleMs,
    });
    this.#cache = new BlobCache(path.join(config.dataDir, 'cache'));
  }

  /** The bare repository of one knotless repository. */
  gitDir(did: string, repo: string): string {
    return path.join(this.root, didDir(did), `${repo}.git`);
  }

  /** Asks for a sync of one repository; the promise settles when the mirror matches the index. */
  schedule(did: string, repo: string): Promise<void> {
    const key = `${did}\n${repo}`;
    const running = this.#running.get(key);
    if (running !== undefined) {
      this.#again.add(key);
      return running;
    }
    const p = (async () => {
      do {
        this.#again.delete(key);
        try {
          await this.sync(did, repo);
        } catch (err) {
          // A compaction or force push replaced packs mid-download, and the index has not seen the
          // new record yet: not damage, and the record's own event syncs this mirror again.
          if (err instanceof BlobGone || isKnotlessError(err, 'remote-changed')) {
            this.#log(
              `mirror ${did}/${repo}: its packs were replaced while they were downloaded (a compaction or force push); the record's next event syncs it again`,
            );
            continue;
          }
          this.#log(`mirror ${did}/${repo}: ${err instanceof Error ? err.message : String(err)}`);
        }
      } while (this.#again.has(key));
    })().finally(() => this.#running.delete(key));
    this.#running.set(key, p);
    return p;
  }

  /** A client for `did`'s PDS, through the mirror's guarded transport. */
  async ownerClient(did: string): Promise<XrpcClient> {
    const owner = await this.#identities.owner(did);
    if (owner.pds === null) throw new Error(`${did} names no PDS`);
    return new XrpcClient(owner.pds, { transport: this.#transport });
  }

  /** Settles when no sync is running. */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.all(this.#running.values());
  }

  /** Brings one repository's mirror in line with the index. */
  async sync(did: string, repo: string): Promise<void> {
    const dir = this.gitDir(did, repo);
    const known = await this.#index.repo(did, repo);
    const refs = await this.#index.refs(did, repo);
    if (known === undefined && refs.length === 0) {
      fs.rmSync(dir, { recursive: true, force: true });
      return;
    }
    if (!fs.existsSync(path.join(dir, 'HEAD'))) {
      fs.mkdirSync(dir, { recursive: true });
      await runGit(['init', '-q', '--bare', dir]);
      // Mirrors are rebuilt from the network: no reflogs, no automatic gc racing index-pack.
      await runGit(['config', 'core.logAllRefUpdates', 'false'], { gitDir: dir });
      await runGit(['config', 'gc.auto', '0'], { gitDir: dir });
    }
    const targets = refs.filter((r) => r.target !== null);
    const present = await wholeObjects(
      dir,
      targets.map((r) => r.target!),
    );
    const missing = targets.filter((r) => !present.has(r.target!));
    if (missing.length > 0) await this.#fetchPacks(did, repo, dir, missing, targets);
    await this.#updateRefs(dir, refs);
  }

  async #fetchPacks(did: string, repo: string, dir: string, missing: RefRow[], all: RefRow[]): Promise<void> {
    const total = unionPacks(all.map(packsOf)).reduce((n, p) => n + p.size, 0);
    if (total > this.#config.maxRepoBytes)
      throw new MirrorLimit(`packs total ${total} bytes, over the limit of ${this.#config.maxRepoBytes}`);
    const bounded = (list: PackEntry[]): PackEntry[] => {
      const big = list.find((p) => p.size > this.#config.maxPackBytes);
      if (big !== undefined) throw new MirrorLimit(`pack ${big.id} has ${big.size} bytes, over the limit`);
      const sum = list.reduce((n, p) => n + p.size, 0);
      if (sum > this.#config.maxRepoBytes)
        throw new MirrorLimit(`packs total ${sum} bytes, over the limit of ${this.#config.maxRepoBytes}`);
      return list;
    };
    const packs = bounded(unionPacks(missing.map(packsOf)));
    const client = await this.ownerClient(did);
    const indexed = new IndexedPacks(dir);
    const done = indexed.read();
    const index = async (list: PackEntry[]): Promise<void> => {
      for (const p of list) {
        // On disk, streamed to git: a mirror's memory does not grow with the pack.
        const file = await loadPack(client, did, p, this.#cache, () => {});
        const { keepFile } = await indexPack(file, dir, false).finally(() => file.close());
        fs.rmSync(keepFile, { force: true });
        indexed.add(p.id);
      }
    };
    const names = new Set(missing.map((r) => r.ref));
    // A compaction or force push that lands mid-download frees the blobs of the packs it replaced:
    // read the index again (its event may be in already) and download what it lists now.
    await withRelist(
      packs,
      async () => {
        const rows = (await this.#index.refs(did, repo)).filter((r) => names.has(r.ref));
        return rows.length < names.size ? undefined : bounded(unionPacks(rows.map(packsOf)));
      },
      async (list) => {
        try {
          await index(list.filter((p) => !done.has(p.id)));
        } catch (err) {
          // A pack noted as indexed may be gone: index the whole list, as the helper does.
          if (!(err instanceof GitError)) throw err;
          await index(list);
        }
      },
      `${did}/${repo}`,
    );
  }

  async #updateRefs(dir: string, refs: RefRow[]): Promise<void> {
    const out = await runGit(['for-each-ref', '--format=%(objectname) %(refname)'], { gitDir: dir });
    const current = new Map(
      out.stdout
        .toString('utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => [l.slice(41), l.slice(0, 40)] as const),
    );
    const wanted = new Map(refs.filter((r) => r.target !== null).map((r) => [r.ref, r.target!]));
    const present = await wholeObjects(dir, [...wanted.values()]);
    const lines: string[] = [];
    for (const [ref, oid] of wanted)
      if (present.has(oid) && current.get(ref) !== oid) lines.push(`update ${ref} ${oid}`);
    for (const ref of current.keys()) if (!wanted.has(ref)) lines.push(`delete ${ref}`);
    if (lines.length > 0) {
      await runGit(['update-ref', '--stdin'], { gitDir: dir, input: lines.join('\n') + '\n' });
      refsChanged(dir);
      // Pages read every ref: one packed-refs file instead of thousands of loose ones, and a
      // commit-graph (written in layers, so a push adds only its own commits) for counts, logs and
      // ahead/behind. Both only speed reads up; the refs are already in place.
      await runGit(['pack-refs', '--all', '--prune'], { gitDir: dir });
      await runGit(['commit-graph', 'write', '--reachable', '--split', '--no-progress'], { gitDir: dir });
    }
    const head = refs.find((r) => r.ref === 'HEAD')?.symref;
    if (head !== undefined && head !== null) await runGit(['symbolic-ref', 'HEAD', head], { gitDir: dir });
    refsChanged(dir);
  }

  /**
   * Makes sure a pull request round's commits are in the target repository's mirror, fetching the
   * round's pack from its author's PDS when its head is missing. One download per pack at a time.
   */
  async loadRound(authorDid: string, gitDir: string, round: Round): Promise<void> {
    if ((await wholeObjects(gitDir, [round.head])).has(round.head)) return;
    const key = `${gitDir}\n${round.pack.cid}`;
    let p = this.#rounds.get(key);
    if (p === undefined) {
      p = loadRoundPack(
        {
          identities: this.#identities,
          transport: this.#transport,
          cache: this.#cache,
          maxPackBytes: this.#config.maxPackBytes,
          maxRoundBytes: this.#config.maxRoundBytes,
        },
        authorDid,
        gitDir,
        round,
      ).finally(() => this.#rounds.delete(key));
      this.#rounds.set(key, p);
    }
    await p;
    if (!(await presentObjects(gitDir, [round.head])).has(round.head))
      throw new RoundUnavailable(`the round's pack does not hold its head ${round.head}`);
    if (!(await wholeObjects(gitDir, [round.head])).has(round.head))
      throw new RoundUnavailable(`the round's pack lacks objects its head ${round.head} needs`);
  }

  /** Closes connections. */
  close(): void {
    this.#transport.close();
  }
}

/**
 * Which of `oids` the repository has whole: the commit and everything it reaches that the refs do
 * not. Round packs go into a mirror without a ref, and anyone can write a round holding a commit
 * without its trees: such a commit must not count as present, or a branch later moved to it would
 * skip its own packs and point at a commit git calls broken.
 */
async function wholeObjects(dir: string, oids: string[]): Promise<Set<string>> {
  const present = [...(await presentObjects(dir, oids))];
  const whole = async (list: string[]) =>
    list.length === 0 ||
    (await runGit(['rev-list', '--objects', '--quiet', '--stdin', '--not', '--all'], {
      gitDir: dir,
      input: list.join('\n') + '\n',
      okCodes: [128],
    }).then((r) => r.code === 0));
  if (await whole(present)) return new Set(present);
  // Rare: one at a time, to keep the whole ones.
  const out = new Set<string>();
  for (const oid of present) if (await whole([oid])) out.add(oid);
  return out;
}

/** Which of `oids` the repository has. */
async function presentObjects(dir: string, oids: string[]): Promise<Set<string>> {
  if (oids.length === 0) return new Set();
  const out = await runGit(['cat-file', '--batch-check=%(objectname) %(objecttype)'], {
    gitDir: dir,
    input: oids.join('\n') + '\n',
  });
  return new Set(
    out.stdout
      .toString('utf8')
      .split('\n')
      .filter((l) => l !== '' && !l.endsWith(' missing'))
      .map((l) => l.slice(0, 40)),
  );
}
