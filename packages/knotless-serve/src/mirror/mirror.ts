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
  REF_COLLECTION,
  type PackEntry,
  type Transport,
} from 'knotless-core';
import { REFS_COLLECTION } from 'knotless-core/records/collections';
import { writeRefRecord } from 'knotless-core/records/ref-record';
import { verifiedRead } from 'knotless-core/records/verified-read';
import type { RemoteRef } from 'knotless-core/records/remote-repo';
import type { ServeConfig } from '../config.ts';
import type { Index, RefRow } from '../db/index-store.ts';
import { applyWrite } from '../ingest/apply.ts';
import type { Identities } from '../ingest/identities.ts';
import { packsOf } from '../model/packs.ts';
import { guardedTransport } from '../net/guard.ts';
import type { StoredRound as Round } from '../db/schema.ts';
import { refsChanged } from './ref-cache.ts';
import { Rounds } from './rounds.ts';
import { trace } from '../trace.ts';
import {
  createMirror,
  currentRefs,
  headSymref,
  maintain,
  mirrorTemplate,
  whole,
  wholeObjects,
} from './objects.ts';
import { Slots } from './queue.ts';

/**
 * Syncs running at once, all repositories together: enough that a push is not held behind another
 * repository's download, few enough that a burst does not start every git process at once.
 */
const SYNC_SLOTS = 4;

/** Thrown when a repository's packs exceed the configured bounds. */
export class MirrorLimit extends Error {
  override name = 'MirrorLimit';
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
  /** Repositories whose next sync is urgent (see {@link schedule}). */
  readonly #urgent = new Set<string>();
  readonly #slots = new Slots(SYNC_SLOTS);
  #template: Promise<string> | undefined;
  /** Each mirror's refs as its last sync left them (name to object id). */
  readonly #refsOf = new Map<string, Map<string, string>>();
  readonly #rounds: Rounds;

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
    this.#rounds = new Rounds(
      {
        identities,
        transport: this.#transport,
        cache: this.#cache,
        maxPackBytes: config.maxPackBytes,
        maxRoundBytes: config.maxRoundBytes,
      },
      this.#slots,
      log,
    );
  }

  /** The bare repository of one knotless repository. */
  gitDir(did: string, repo: string): string {
    return path.join(this.root, didDir(did), `${repo}.git`);
  }

  /**
   * Asks for a sync of one repository; the promise settles when the mirror matches the index.
   * `urgent`: a push just seen on a stream, or a reader waiting, goes ahead of catch-up syncs.
   */
  schedule(did: string, repo: string, urgent = false): Promise<void> {
    const key = `${did}\n${repo}`;
    if (urgent) this.#urgent.add(key);
    const running = this.#running.get(key);
    if (running !== undefined) {
      this.#again.add(key);
      return running;
    }
    const p = (async () => {
      let moved: { refs: number; objects: number } | undefined;
      do {
        this.#again.delete(key);
        const now = this.#urgent.delete(key);
        await this.#slots.run(now, async () => {
          moved = (await this.#syncLogged(did, repo)) ?? moved;
          // After the refs moved and the page shows them, unless another sync of this repository
          // is already asked for (it does this after itself).
          if (moved !== undefined && !this.#again.has(key)) {
            const size = moved;
            moved = undefined;
            await maintain(this.gitDir(did, repo), size).catch((err: unknown) =>
              this.#log(
                `mirror ${did}/${repo}: packing refs: ${err instanceof Error ? err.message : String(err)}`,
              ),
            );
            trace('maintained', `${did}/${repo}`);
          }
        });
      } while (this.#again.has(key));
    })().finally(() => this.#running.delete(key));
    this.#running.set(key, p);
    return p;
  }

  /** One sync, its failure logged; the repository's size when it moved refs. */
  async #syncLogged(did: string, repo: string): Promise<{ refs: number; objects: number } | undefined> {
    try {
      return await this.#sync(did, repo);
    } catch (err) {
      // A compaction or force push replaced packs mid-download, and the index has not seen the
      // new record yet: not damage, and the record's own event syncs this mirror again.
      if (err instanceof BlobGone || isKnotlessError(err, 'remote-changed'))
        this.#log(
          `mirror ${did}/${repo}: its packs were replaced while they were downloaded (a compaction or force push); the record's next event syncs it again`,
        );
      else this.#log(`mirror ${did}/${repo}: ${err instanceof Error ? err.message : String(err)}`);
      return undefined;
    }
  }

  /**
   * The blob cache syncs read packs from: a write this appview makes stores the blobs it uploads
   * here, so that syncing it downloads nothing (see {@link wrote}).
   */
  get cache(): BlobCache {
    return this.#cache;
  }

  /**
   * A ref record this appview wrote itself (a commit made in the browser), taken as its event on
   * the account's stream would be: the index applies it by the same rule (`applyWrite`; the event,
   * arriving later with the same revision, then changes nothing) and the mirror syncs at once, as
   * after that event (or waits for the sync that event started, when it came first), from the
   * packs the write left in {@link cache}. The next page shows the write
   * without waiting for the stream. Settles when the mirror matches the index.
   */
  async wrote(did: string, written: RemoteRef, writer = did): Promise<void> {
    const repo = written.record.repo;
    // A private repository's refs are sealed: none is ever indexed, however it was learned.
    if ((await this.#index.repo(did, repo))?.private === 1) return;
    // A ref written to a ref table (its key `<table key>#<ref>`) is one entry of the table: the
    // table as the write left it is read back with its proof (one getRecord) and indexed as its
    // event would be, so that the page after the write shows it without waiting for the stream.
    // A maintainer's table (`writer`) is read from the maintainer's account, the mirror the owner's.
    if (written.key.includes('#')) {
      await this.#takeTable(writer, repo, written.key.slice(0, written.key.indexOf('#')));
      await this.schedule(did, repo, true);
      return;
    }
    // A record write without its revision is left to its event, which has it.
    if (written.rev === undefined || written.rev === '') return;
    await applyWrite(this.#index, {
      did,
      collection: REF_COLLECTION,
      rkey: written.key,
      rev: written.rev,
      cid: written.cid,
      // In the form the PDS holds it, read back by the same parser as an event's.
      record: writeRefRecord(written.record),
      time: new Date().toISOString(),
    });
    // Also when the event came first: its sync may still be running, and this settles after it.
    await this.schedule(did, repo, true);
  }

  /**
   * Indexes the account's ref table `rkey` as its PDS holds it now, verified against the account's
   * signing key (core's verifiedRead), as the table's event would. A table that is gone is left to
   * its event; a newer table the stream already indexed is not replaced (rows carry revisions).
   */
  async #takeTable(did: string, repo: string, rkey: string): Promise<void> {
    const owner = await this.#identities.owner(did);
    if (owner.pds === null) return;
    const got = await verifiedRead({
      transport: this.#transport,
      pds: owner.pds,
      did,
      collection: REFS_COLLECTION,
      rkey,
      signingKey: await this.#identities.signingKey(did),
      name: `${did}/${repo}`,
    });
    if (!got.found) return;
    await applyWrite(
      this.#index,
      {
        did,
        collection: REFS_COLLECTION,
        rkey,
        rev: got.rev,
        cid: got.cid,
        record: got.value,
        time: new Date().toISOString(),
      },
      undefined,
      this.#log,
    );
  }

  /** A client for `did`'s PDS, through the mirror's guarded transport. */
  async ownerClient(did: string): Promise<XrpcClient> {
    const owner = await this.#identities.owner(did);
    if (owner.pds === null) throw new Error(`${did} names no PDS`);
    return new XrpcClient(owner.pds, { transport: this.#transport });
  }

  /** Settles when no sync, and no download of a round, is running. */
  async idle(): Promise<void> {
    while (this.#running.size > 0 || this.#rounds.running().length > 0)
      await Promise.all([...this.#running.values(), ...this.#rounds.running()]);
  }

  /**
   * Brings one repository's mirror in line with the index; its size when its refs moved. Each git
   * process on a push's path counts (objects.ts): the mirror's refs are remembered from its last
   * sync (this process is their only writer), refs already at their target are not looked at
   * again, and a new mirror has nothing to look at.
   */
  async #sync(did: string, repo: string): Promise<{ refs: number; objects: number } | undefined> {
    const key = `${did}/${repo}`;
    trace('mirror-start', key);
    const dir = this.gitDir(did, repo);
    const known = await this.#index.repo(did, repo);
    const refs = await this.#index.refs(did, repo);
    if (known === undefined && refs.length === 0) {
      this.#refsOf.delete(dir);
      // Rare (a deleted repository): the heads known whole are forgotten, this mirror's with them.
      this.#rounds.forget();
      fs.rmSync(dir, { recursive: true, force: true });
      return undefined;
    }
    const fresh = !fs.existsSync(path.join(dir, 'HEAD'));
    if (fresh) {
      this.#refsOf.delete(dir);
      await createMirror(dir, await (this.#template ??= mirrorTemplate(this.root)));
    }
    // Taken out while the sync runs: a sync that fails reads the refs again next time.
    const current = fresh ? new Map<string, string>() : (this.#refsOf.get(dir) ?? (await currentRefs(dir)));
    this.#refsOf.delete(dir);
    const targets = refs.filter((r) => r.target !== null);
    // A ref already at its target was whole when it was set.
    const moving = targets.filter((r) => current.get(r.ref) !== r.target);
    const present = fresh ? new Set<string>() : await wholeObjects(dir, unique(moving.map((r) => r.target!)));
    const missing = moving.filter((r) => !present.has(r.target!));
    if (missing.length > 0) {
      await this.#fetchPacks(did, repo, dir, missing, targets);
      const fetched = unique(missing.map((r) => r.target!));
      for (const oid of (await whole(dir, fetched)) ? fetched : await wholeObjects(dir, fetched))
        present.add(oid);
    }
    const moved = await this.#updateRefs(dir, refs, current, present, key);
    this.#refsOf.set(dir, current);
    trace('mirror-done', key);
    if (!moved) return undefined;
    return { refs: current.size, objects: unionPacks(targets.map(packsOf)).reduce((n, p) => n + p.count, 0) };
  }

  /**
   * Why packs are past this mirror's bounds (`maxRepoBytes` in all, `maxPackBytes` each), or
   * undefined: the one rule syncs refuse by and pages tell readers by ({@link tooLarge}).
   */
  #overLimit(list: PackEntry[]): string | undefined {
    const big = list.find((p) => p.size > this.#config.maxPackBytes);
    if (big !== undefined) return `pack ${big.id} has ${big.size} bytes, over the limit`;
    const sum = list.reduce((n, p) => n + p.size, 0);
    if (sum > this.#config.maxRepoBytes)
      return `packs total ${sum} bytes, over the limit of ${this.#config.maxRepoBytes}`;
    return undefined;
  }

  /**
   * Whether the repository the index knows is past this mirror's bounds: its syncs refuse it, so
   * this appview's copy never has what its records name now.
   */
  async tooLarge(did: string, repo: string): Promise<boolean> {
    const targets = (await this.#index.refs(did, repo)).filter((r) => r.target !== null);
    return this.#overLimit(unionPacks(targets.map(packsOf))) !== undefined;
  }

  async #fetchPacks(did: string, repo: string, dir: string, missing: RefRow[], all: RefRow[]): Promise<void> {
    const bounded = (list: PackEntry[]): PackEntry[] => {
      const why = this.#overLimit(list);
      if (why !== undefined) throw new MirrorLimit(why);
      return list;
    };
    // The whole repository first: a mirror that could never hold it downloads none of it.
    bounded(unionPacks(all.map(packsOf)));
    bounded(unionPacks(missing.map(packsOf)));
    // A team's ref whose value is a maintainer's names packs in the maintainer's own account
    // (its row's `did`): each holder's packs are read from their PDS.
    const holders = [...new Set(missing.map((r) => r.did))].sort();
    for (const holder of holders)
      await this.#fetchHeld(
        holder,
        repo,
        dir,
        missing.filter((r) => r.did === holder),
        bounded,
        did,
      );
  }

  /** Downloads and indexes the packs `holder`'s account holds for `missing` (refs of `owner`'s repository). */
  async #fetchHeld(
    holder: string,
    repo: string,
    dir: string,
    missing: RefRow[],
    bounded: (list: PackEntry[]) => PackEntry[],
    owner: string,
  ): Promise<void> {
    const packs = bounded(unionPacks(missing.map(packsOf)));
    const client = await this.ownerClient(holder);
    const indexed = new IndexedPacks(dir);
    const done = indexed.read();
    const index = async (list: PackEntry[]): Promise<void> => {
      for (const p of list) {
        // On disk, streamed to git: a mirror's memory does not grow with the pack.
        const file = await loadPack(client, holder, p, this.#cache, () => {});
        trace('packs', `${owner}/${repo}`);
        const { keepFile } = await indexPack(file, dir, false).finally(() => file.close());
        trace('index-pack', `${owner}/${repo}`);
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
        const rows = (await this.#index.refs(owner, repo)).filter(
          (r) => names.has(r.ref) && r.did === holder,
        );
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
      `${owner}/${repo}`,
    );
  }

  /** Sets the mirror's refs to the index's where their commits are whole (`present`); `current` follows. */
  async #updateRefs(
    dir: string,
    refs: RefRow[],
    current: Map<string, string>,
    present: Set<string>,
    key: string,
  ): Promise<boolean> {
    const wanted = new Map(refs.filter((r) => r.target !== null).map((r) => [r.ref, r.target!]));
    const lines: string[] = [];
    for (const [ref, oid] of wanted)
      if (current.get(ref) !== oid && present.has(oid)) lines.push(`update ${ref} ${oid}`);
    for (const ref of current.keys()) if (!wanted.has(ref)) lines.push(`delete ${ref}`);
    if (lines.length > 0) {
      await runGit(['update-ref', '--stdin'], { gitDir: dir, input: lines.join('\n') + '\n' });
      for (const line of lines) {
        const [verb, ref, oid] = line.split(' ');
        if (verb === 'update') current.set(ref!, oid!);
        else current.delete(ref!);
      }
      refsChanged(dir);
      trace('refs', key);
    }
    const head = refs.find((r) => r.ref === 'HEAD')?.symref;
    if (head !== undefined && head !== null && headSymref(dir) !== head) {
      await runGit(['symbolic-ref', 'HEAD', head], { gitDir: dir });
      refsChanged(dir);
    }
    return lines.length > 0;
  }

  /** A pull request's newest round, fetched into its target's mirror as its record comes in. */
  prefetchRound(authorDid: string, did: string, repo: string, round: Round): void {
    this.#rounds.ahead(authorDid, this.gitDir(did, repo), `${did}/${repo}`, round);
  }

  /** Makes sure a pull request round's commits are in the target repository's mirror (rounds.ts). */
  loadRound(authorDid: string, gitDir: string, round: Round): Promise<void> {
    return this.#rounds.load(authorDid, gitDir, round);
  }

  /** Closes connections. */
  close(): void {
    this.#transport.close();
  }
}

function unique(list: string[]): string[] {
  return [...new Set(list)];
}
