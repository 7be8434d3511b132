// The reference CI runner: follows the owner's account on its PDS's event stream (and, given one, a
// relay's, which carries every account's), and the streams of the PDSes of the maintainers the
// owner's ref table lists (as each listing finds them), and on each new head commit of a branch of one
// repository (its heads as every reader computes them, a team's by core's rule), or new round of a pull request on it by any account, writes `pending`, fetches the
// commit into a cache (a branch with knotless://, a round from its pack in its author's account),
// runs a command in a scratch work tree with a time limit, and writes the verdict, all as the
// logged-in account (the runner). Its state (the streams' cursors, the commits reported, the run
// under way) is a file under the data folder, so a restart neither re-runs what was reported nor
// leaves a `pending` behind; its verdicts are records in its own account too, read once at start,
// so that a runner whose state is lost (a new machine) does not run again what it reported.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { writeCheck } from 'knotless-core/forge/checks-store';
import { checkRoundComplete, loadRoundPack } from 'knotless-core/forge/packs';
import { CHECK, PULL, parseAtUri, type CheckState, type PullRecord } from 'knotless-core/forge/records';
import type { ForgeStore, Stored } from 'knotless-core/forge/store';
import { readJson, writeFileAtomic } from 'knotless-core/fsutil';
import { indexPack } from 'knotless-core/git/pack';
import type { Identity } from 'knotless-core/identity/resolver';
import { REF_COLLECTION, REFS_COLLECTION, refKeyPrefix } from 'knotless-core/records/collections';
import { lastTableRead, lastTeamRead, readRepoRefs } from 'knotless-core/records/read-refs';
import { maintainersOf, refTableKey } from 'knotless-core/records/ref-table';
import { safeText } from 'knotless-core/text/terminal';
import { XrpcError } from 'knotless-core/xrpc/client';
import type { Context } from '../context.ts';
import type { SessionAuthorizer } from '../auth/store.ts';
import { PULLS } from '../forge/kinds.ts';
import { parseCheck, parsePull } from '../forge/records.ts';
import { listItems, reader, withStates } from '../forge/subjects.ts';

const METHOD = 'com.atproto.sync.subscribeRepos';
/** How many reported commits the state remembers (the oldest are forgotten first). */
const DONE_KEPT = 10_000;
/** How much of the command's output the description quotes (a check's description is ≤ 300 graphemes). */
const TAIL_CHARS = 240;
/**
 * How many of its own check records a runner reads at start, newest first (a page of 100 a
 * request, so at most 200 requests): two for each of the newest {@link DONE_KEPT} commits.
 */
export const VERDICTS_READ = 2 * DONE_KEPT;
/**
 * At a first start with a relay and no appview, how many accounts holding pull requests the relay
 * is asked for at most (listReposByCollection, pages of 500), and how many of each one's pull
 * records are read, newest first (one listRecords page): a bounded cost, said in the docs.
 */
export const DISCOVERED_ACCOUNTS = 1000;
export const PULLS_READ_EACH = 100;
/** How many accounts are read at once. */
const DISCOVERY_AT_ONCE = 4;
/** The description of an `error` the runner writes when it is stopped mid-run: no verdict on the commit. */
const STOPPED = 'the runner was stopped before the command finished';
/** The description of an `error` written for a run a killed runner left `pending`: it runs again. */
const LEFT = 'the runner stopped before the command finished; it runs again';

export interface RunnerOptions {
  owner: Identity;
  name: string;
  /** The repository as printed: handle/name. */
  label: string;
  repoUri: string;
  context: string;
  command: string[];
  timeoutMs: number;
  /** A relay's http(s) URL: its event stream carries the pull requests of every account. */
  relay?: string | undefined;
  /** Lines for the user (stderr). */
  log: (line: string) => void;
}

interface RunnerState {
  /** The PDS whose stream `cursor` counts in. */
  pds?: string;
  cursor?: number;
  /** The relay whose stream `relayCursor` counts in. */
  relay?: string;
  relayCursor?: number;
  /** Commits reported with a final verdict, oldest first, with it. */
  done: Array<[string, CheckState]>;
  /**
   * The run under way: its pending check is written, its verdict not yet. `branch` is the branch
   * run, or the base branch of the pull request `pull` (its at-uri) whose round it is.
   */
  running?: { commit: string; branch: string; pid?: number; pull?: string; label?: string };
}

/** What one run is of: a branch's head, or a pull request's last round. */
interface Subject {
  commit: string;
  branch: string;
  /** How the lines name it: `on main`, `of pull request bob.example/3k… (round 1)`. */
  label: string;
  pull?: { uri: string; author: Identity; record: PullRecord };
}

/** The runner's folder for one repository and context, under the data folder. */
export function runnerDir(dataDir: string, owner: string, name: string, context: string): string {
  const id = createHash('sha256')
    .update(JSON.stringify([owner, name, context]))
    .digest('hex')
    .slice(0, 16);
  return path.join(dataDir, 'runner', `${name.replace(/[^A-Za-z0-9._-]/g, '_')}-${id}`);
}

/** Output as one line for a check's description: no control characters, the last characters kept. */
export function describeOutput(output: string): string {
  const lines = output
    // eslint-disable-next-line no-control-regex
    .replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '')
    .split(/\r?\n|\r/)
    .map((l) => l.replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, ' ').trim())
    .filter((l) => l !== '');
  const joined = lines.join(' | ');
  return joined.length > TAIL_CHARS ? `…${joined.slice(-TAIL_CHARS)}` : joined;
}

export class Runner {
  readonly #ctx: Context;
  readonly #store: ForgeStore;
  readonly #auth: SessionAuthorizer;
  readonly #o: RunnerOptions;
  readonly #dir: string;
  readonly #stateFile: string;
  #state: RunnerState;
  #child: { pid: number; kill: () => void } | undefined;
  #stopping = false;
  #wanted = false;
  #wake: (() => void) | undefined;
  /** The last sequence number the stream delivered, and the one up to which every event was handled. */
  #delivered: number | undefined;
  #wantedUpTo: number | undefined;
  /** The relay's last sequence number delivered, and the last whose pull requests are queued. */
  #relayDelivered: number | undefined;
  #relayUpTo: number | undefined;
  /** Pull requests (at-uris) heard of and not yet read, in the order heard. */
  readonly #pulls = new Set<string>();
  /** Whether the repository's open pull requests are to be listed (a stream opened). */
  #listPulls = false;
  /**
   * Whether the accounts holding pull requests are still to be found through the relay: at a first
   * start (no cursor of the relay's), whose stream says nothing of what came before it.
   */
  #discover: boolean;
  readonly #abort = new AbortController();
  /** Each commit's latest check of this repository and context in the runner's account, read at start. */
  #verdicts = new Map<string, { state: CheckState; description: string | undefined }>();
  /**
   * The maintainers the owner's ref table listed at the last listing, by DID, with their PDS: a
   * push of theirs writes their own table, in their own account, so it is heard on their stream.
   */
  #members = new Map<string, string>();
  /**
   * The streams followed for maintainers on PDSes other than the owner's (whose stream already
   * carries them), one per PDS, each ended once no maintainer is on it any more.
   */
  readonly #memberStreams = new Map<string, { stop: AbortController; done: Promise<void> }>();

  constructor(ctx: Context, store: ForgeStore, auth: SessionAuthorizer, o: RunnerOptions) {
    this.#ctx = ctx;
    this.#store = store;
    this.#auth = auth;
    this.#o = o;
    this.#dir = runnerDir(ctx.config.dataDir, o.owner.did, o.name, o.context);
    this.#stateFile = path.join(this.#dir, 'state.json');
    fs.mkdirSync(path.join(this.#dir, 'logs'), { recursive: true, mode: 0o700 });
    const read = readJson<RunnerState>(this.#stateFile);
    this.#state = {
      done: Array.isArray(read?.done) ? read.done : [],
      ...(read?.running ? { running: read.running } : {}),
    };
    // A cursor counts only on the PDS it was read from (the account may have moved since).
    if (read?.pds === o.owner.pds && typeof read.cursor === 'number') {
      this.#state.pds = read.pds;
      this.#state.cursor = read.cursor;
    }
    if (o.relay !== undefined && read?.relay === o.relay && typeof read.relayCursor === 'number') {
      this.#state.relay = read.relay;
      this.#state.relayCursor = read.relayCursor;
    }
    this.#delivered = this.#state.cursor;
    this.#relayDelivered = this.#state.relayCursor;
    this.#discover = o.relay !== undefined && this.#state.relayCursor === undefined;
  }

  get dir(): string {
    return this.#dir;
  }

  /** Runs until {@link stop}: recovers an interrupted run, then follows the stream and runs each new head. */
  async run(): Promise<void> {
    await this.#readVerdicts();
    await this.#recover();
    const worker = this.#work();
    this.#want(undefined);
    const relay = this.#o.relay;
    await Promise.all([
      this.#follow(
        this.#o.owner.pds,
        () => this.#delivered,
        (m) => this.#ownerEvent(m),
        (seq) => (this.#delivered = seq),
      ),
      ...(relay === undefined
        ? []
        : [
            this.#follow(
              relay,
              () => this.#relayDelivered,
              (m) => this.#relayEvent(m),
              (seq) => (this.#relayDelivered = seq),
            ),
          ]),
      worker,
    ]);
    for (const s of this.#memberStreams.values()) s.stop.abort();
    await Promise.all([...this.#memberStreams.values()].map((s) => s.done));
  }

  /** Stops: a command under way is killed and its check turned into `error` before {@link run} ends. */
  stop(): void {
    this.#stopping = true;
    this.#abort.abort();
    this.#child?.kill();
    this.#wake?.();
  }

  #save(): void {
    writeFileAtomic(this.#stateFile, `${JSON.stringify(this.#state)}\n`);
  }

  #isDone(commit: string): boolean {
    return this.#state.done.some(([c]) => c === commit);
  }

  async #write(commit: string, state: CheckState, description: string): Promise<void> {
    await writeCheck(this.#store, this.#auth, parseCheck, {
      repo: this.#o.repoUri,
      commit,
      context: this.#o.context,
      state,
      ...(description === '' ? {} : { description }),
    });
  }

  /** Notes `commit`'s final verdict, so that it is never run again (the oldest are forgotten first). */
  #markDone(commit: string, state: CheckState): void {
    this.#state.done.push([commit, state]);
    if (this.#state.done.length > DONE_KEPT) this.#state.done.splice(0, this.#state.done.length - DONE_KEPT);
  }

  /**
   * The runner's own verdicts, read from its account once at start (newest first, at most
   * {@link VERDICTS_READ} records): each commit's latest check of this repository and context. A
   * final one (success, failure, or an error that is not the runner's own stop) is noted as done, so
   * a runner whose state was lost runs none of them again; a `pending` as the latest is what a
   * killed runner left: it becomes `error` and runs again (as {@link recover} does for the run its
   * state names). A commit reported before the newest records read may run again: said in the docs.
   */
  async #readVerdicts(): Promise<void> {
    const me = { did: this.#auth.session.did, pds: this.#auth.session.pds };
    const latest = new Map<string, { state: CheckState; description: string | undefined }>();
    let read = 0;
    let cursor: string | undefined;
    do {
      const page = await this.#store.page(me, CHECK, parseCheck, 100, cursor);
      read += page.read;
      // Newest first: the first record of a commit read is its latest.
      for (const r of page.records) {
        const c = r.value;
        if (c.repo !== this.#o.repoUri || c.context !== this.#o.context || latest.has(c.commit)) continue;
        latest.set(c.commit, { state: c.state, description: c.description });
      }
      cursor = page.complete ? undefined : page.cursor;
    } while (cursor !== undefined && read < VERDICTS_READ && !this.#stopping);
    this.#verdicts = latest;
    const left: string[] = [];
    // Oldest first, as the state keeps them.
    for (const [commit, v] of [...latest].reverse()) {
      if (this.#isDone(commit)) continue;
      if (v.state === 'pending') {
        if (this.#state.running?.commit !== commit) left.push(commit);
      } else if (!(v.state === 'error' && (v.description === STOPPED || v.description === LEFT)))
        this.#markDone(commit, v.state);
    }
    for (const commit of left) {
      if (this.#stopping) return;
      await this.#write(commit, 'error', LEFT);
      this.#o.log(`${commit.slice(0, 12)}: error (an earlier runner stopped mid-run)`);
    }
    this.#save();
  }

  /** The runner's latest final verdict on `commit` as read at start ({@link readVerdicts}). */
  #reported(commit: string): CheckState | undefined {
    const v = this.#verdicts.get(commit);
    if (v === undefined || v.state === 'pending') return undefined;
    if (v.state === 'error' && (v.description === STOPPED || v.description === LEFT)) return undefined;
    return v.state;
  }

  /**
   * A run a killed runner left under way: its command is ended and its `pending` becomes `error`,
   * to be run again; unless its verdict was written before the runner was killed (between that
   * write and noting it here), which then stands: a commit with a final verdict never runs twice.
   */
  async #recover(): Promise<void> {
    const left = this.#state.running;
    if (left === undefined) return;
    if (left.pid !== undefined) killGroup(left.pid);
    // Named as its own lines named it (an older state has no label: the branch, or the author's DID).
    const what =
      left.label ?? (left.pull === undefined ? `on ${safeText(left.branch)}` : `of ${pullLabel(left.pull)}`);
    const reported = this.#reported(left.commit);
    if (reported !== undefined) {
      this.#markDone(left.commit, reported);
      this.#o.log(
        `${left.commit.slice(0, 12)} ${what}: ${reported} (reported before an earlier runner stopped)`,
      );
      delete this.#state.running;
      this.#save();
      return;
    }
    await this.#write(left.commit, 'error', LEFT);
    this.#o.log(`${left.commit.slice(0, 12)} ${what}: error (an earlier runner stopped mid-run)`);
    // A branch's head is found again by the first scan; a round, by reading its pull request again.
    if (left.pull !== undefined) this.#pulls.add(left.pull);
    delete this.#state.running;
    this.#save();
  }

  #want(seq: number | undefined): void {
    this.#wanted = true;
    if (seq !== undefined) this.#wantedUpTo = seq;
    this.#wake?.();
  }

  /**
   * Scans the repository whenever an event asked for it, one scan at a time, then runs the pull
   * requests heard of; a stream's cursor is saved once everything it delivered up to it is done.
   */
  async #work(): Promise<void> {
    while (!this.#stopping) {
      if (!this.#wanted && !this.#listPulls && this.#pulls.size === 0) {
        await new Promise<void>((resolve) => (this.#wake = resolve));
        this.#wake = undefined;
        continue;
      }
      const scan = this.#wanted;
      this.#wanted = false;
      const upTo = this.#wantedUpTo;
      const relayUpTo = this.#relayUpTo;
      try {
        if (scan) await this.#scan();
        if (this.#listPulls) {
          this.#listPulls = false;
          await this.#listOpenPulls();
        }
      } catch (err) {
        if (this.#stopping) break;
        // The next event scans again; nothing is marked done that was not reported.
        this.#o.log(`reading ${this.#o.label} failed: ${safeText(errorText(err))}`);
        continue;
      }
      while (this.#pulls.size > 0 && !this.#stopping) {
        const uri = this.#pulls.values().next().value!;
        // Taken off the queue before it is read and run: an event on it heard meanwhile (a new
        // round made while this one runs) queues it again, to be read once more after.
        this.#pulls.delete(uri);
        try {
          await this.#pull(uri);
        } catch (err) {
          if (this.#stopping) break;
          // Not tried again and again: the next event on it, or the next listing, tries again.
          this.#o.log(`reading ${pullLabel(uri)} failed: ${safeText(errorText(err))}`);
        }
      }
      if (this.#stopping) continue;
      if (upTo !== undefined) {
        this.#state.pds = this.#o.owner.pds;
        this.#state.cursor = Math.max(this.#state.cursor ?? 0, upTo);
      }
      if (relayUpTo !== undefined && this.#o.relay !== undefined) {
        this.#state.relay = this.#o.relay;
        this.#state.relayCursor = Math.max(this.#state.relayCursor ?? 0, relayUpTo);
      }
      if (upTo !== undefined || relayUpTo !== undefined) this.#save();
    }
  }

  /** Runs every branch head not yet reported, one after another. */
  async #scan(): Promise<void> {
    const remote = this.#ctx.remoteRepo(this.#o.owner, this.#o.name, (m) => this.#o.log(`warning: ${m}`));
    // Its refs whatever its layout (a ref table, or ref records), as every reader takes them: a
    // team's by core's rule, from every maintainer's table (a value the rule did not choose is
    // listed apart, under refs/maintainers/, and is no branch head to run).
    const refs = await readRepoRefs(remote);
    await this.#followMembers(remote);
    const claims = new Map<string, string[]>();
    for (const r of refs) {
      const target = r.record.target;
      if (!r.record.ref.startsWith('refs/heads/') || target === undefined) continue;
      claims.set(r.record.ref, [...(claims.get(r.record.ref) ?? []), target]);
    }
    const heads = [...claims]
      .filter(([, targets]) => targets.length === 1)
      .map(([ref, [target]]) => ({ branch: ref.slice('refs/heads/'.length), commit: target! }))
      .sort((a, b) => (a.branch < b.branch ? -1 : a.branch > b.branch ? 1 : 0));
    for (const h of heads) {
      if (this.#stopping) return;
      if (!/^[0-9a-f]{40}$/.test(h.commit) || this.#isDone(h.commit)) continue;
      await this.#runOne({ ...h, label: `on ${safeText(h.branch)}` });
    }
  }

  /**
   * Follows the maintainers the listing just made found (the owner's table names them; none for a
   * repository on ref records): their pushes are heard on their PDSes' streams, a stream opened for
   * each PDS that is not the owner's (whose stream the runner follows already), and a stream no
   * maintainer needs any more (one removed, or moved to another PDS) is closed. A maintainer whose
   * account cannot be resolved is said and heard again from the next listing.
   */
  async #followMembers(remote: ReturnType<Context['remoteRepo']>): Promise<void> {
    const table = lastTableRead(remote);
    const dids = table === undefined ? [] : maintainersOf(table.table, this.#o.owner.did);
    const read = new Map((lastTeamRead(remote)?.members ?? []).map((m) => [m.did, m.remote.owner.pds]));
    const members = new Map<string, string>();
    for (const did of dids) {
      let pds = read.get(did);
      if (pds === undefined)
        try {
          pds = (await this.#ctx.resolver.resolve(did)).pds;
        } catch (err) {
          this.#o.log(
            `maintainer ${safeText(did)} of ${this.#o.label} could not be resolved (${safeText(errorText(err))}); their pushes are heard from the next listing on`,
          );
          continue;
        }
      members.set(did, pds);
    }
    for (const did of members.keys())
      if (!this.#members.has(did)) this.#o.log(`following maintainer ${safeText(did)} of ${this.#o.label}`);
    for (const did of this.#members.keys())
      if (!members.has(did))
        this.#o.log(`no longer following maintainer ${safeText(did)} of ${this.#o.label}`);
    this.#members = members;
    const wanted = new Set([...members.values()].filter((p) => p !== this.#o.owner.pds));
    for (const [pds, s] of this.#memberStreams)
      if (!wanted.has(pds)) {
        s.stop.abort();
        this.#memberStreams.delete(pds);
      }
    for (const pds of wanted) {
      if (this.#memberStreams.has(pds) || this.#stopping) continue;
      const stop = new AbortController();
      // Heard from where the stream stands when it opens: its opening asks for a listing, which
      // finds anything pushed before.
      const done = this.#follow(
        pds,
        () => undefined,
        (m) => this.#memberEvent(m),
        undefined,
        stop.signal,
      ).catch((err: unknown) => {
        if (!stop.signal.aborted && !this.#stopping)
          this.#o.log(
            `event stream of ${safeText(pds)}: ${safeText(errorText(err))}; its maintainers are heard from the next listing`,
          );
        // A stream that failed is opened again by the next listing that still needs it.
        if (this.#memberStreams.get(pds)?.stop === stop) this.#memberStreams.delete(pds);
      });
      this.#memberStreams.set(pds, { stop, done });
    }
  }

  /** Whether an event is a maintainer's that may change the repository's refs: their table, or their account. */
  #memberConcerns(m: StreamEvent): boolean {
    if (m.did === undefined || !this.#members.has(m.did)) return false;
    const table = `${REFS_COLLECTION}/${refTableKey(this.#o.name, this.#o.owner.did, m.did)}`;
    return m.t !== '#commit' || m.paths.some((p) => p === table);
  }

  /** An event of a maintainer's PDS's stream: their table's write asks for a listing; pull requests are run. */
  #memberEvent(m: StreamEvent): void {
    const pulls = this.#pullsIn(m);
    if (this.#memberConcerns(m)) return this.#want(undefined);
    if (pulls > 0) this.#wake?.();
  }

  /** The repository's open pull requests, as `pr list` finds them: each is read and run like one heard of. */
  async #listOpenPulls(): Promise<void> {
    const r = reader(this.#ctx, (m) => this.#o.log(m));
    const open = await listItems(r, PULLS, this.#o.owner, this.#o.repoUri, 'open', this.#auth.session.did);
    for (const p of open) this.#pulls.add(p.uri);
    // An appview's listing has everyone's; without one, only the owner's and the runner's are listed.
    if (r.appview === undefined && this.#discover) {
      for (const uri of await this.#discoverPulls(r)) this.#pulls.add(uri);
      this.#discover = false;
    }
  }

  /**
   * The open pull requests on this repository in other accounts, found without an appview at a
   * first start: the accounts the relay lists as holding pull records
   * (com.atproto.sync.listReposByCollection, at most {@link DISCOVERED_ACCOUNTS}), then each one's
   * newest {@link PULLS_READ_EACH} pull records, from its own PDS, and the states that count for
   * those on this repository (the owner's and the author's records). An account that cannot be
   * read is said and passed over; a relay without the method is said once.
   */
  async #discoverPulls(r: ReturnType<typeof reader>): Promise<string[]> {
    const relay = this.#o.relay!;
    const client = this.#ctx.client(relay);
    const dids: string[] = [];
    let more: boolean;
    try {
      let cursor: string | undefined;
      do {
        const page = await client.query<{ repos?: unknown; cursor?: unknown }>(
          'com.atproto.sync.listReposByCollection',
          { collection: PULL, limit: 500, ...(cursor === undefined ? {} : { cursor }) },
        );
        const repos = Array.isArray(page.repos) ? (page.repos as { did?: unknown }[]) : [];
        for (const row of repos)
          if (typeof row?.did === 'string' && /^did:[a-z]+:[A-Za-z0-9._:%-]{1,2000}$/.test(row.did))
            dids.push(row.did);
        // A cursor that does not move would loop for ever: a page that repeats ends the listing.
        const next = typeof page.cursor === 'string' && repos.length > 0 ? page.cursor : undefined;
        cursor = next === cursor ? undefined : next;
        more = cursor !== undefined && dids.length >= DISCOVERED_ACCOUNTS;
      } while (cursor !== undefined && !more && !this.#stopping);
    } catch (err) {
      if (!(err instanceof XrpcError) || ![400, 404, 501].includes(err.status)) throw err;
      this.#o.log(
        `${safeText(relay)} does not list the accounts holding pull requests (listReposByCollection): those opened in other accounts before this first start are not looked for`,
      );
      return [];
    }
    if (more)
      this.#o.log(
        `the relay lists more than ${DISCOVERED_ACCOUNTS} accounts holding pull requests: the others' are not looked for`,
      );
    const skip = new Set([this.#o.owner.did, this.#auth.session.did]);
    const accounts = [...new Set(dids.slice(0, DISCOVERED_ACCOUNTS))].filter((d) => !skip.has(d));
    const found: Stored<PullRecord>[] = [];
    const queue = accounts.values();
    const worker = async (): Promise<void> => {
      for (let n = queue.next(); n.done !== true && !this.#stopping; n = queue.next()) {
        try {
          const who = await this.#ctx.resolver.resolve(n.value);
          const page = await this.#store.page(who, PULL, parsePull, PULLS_READ_EACH);
          for (const p of page.records) if (p.value.repo === this.#o.repoUri) found.push(p);
        } catch (err) {
          this.#o.log(
            `reading the pull requests of ${safeText(n.value)} failed: ${safeText(errorText(err))}`,
          );
        }
      }
    };
    await Promise.all(Array.from({ length: DISCOVERY_AT_ONCE }, worker));
    const open = (await withStates(r, PULLS, this.#o.owner, found)).filter((it) => it.state === 'open');
    this.#o.log(
      `pull requests opened before this first start: ${open.length} open on ${this.#o.label} in the ${accounts.length} other account${accounts.length === 1 ? '' : 's'} the relay lists as holding pull requests`,
    );
    return open.map((it) => it.uri);
  }

  /**
   * Runs the last round of the pull request `uri` when it is on this repository and its head is not
   * reported yet. The record is read from its author's PDS, whoever that is: what a stream said of
   * it is only a hint, and a pull request counts for the repository its record names.
   */
  async #pull(uri: string): Promise<void> {
    const at = parseAtUri(uri);
    if (at?.collection !== PULL) return;
    const author = at.did === this.#o.owner.did ? this.#o.owner : await this.#ctx.resolver.resolve(at.did);
    const got = await this.#store.get(author, PULL, at.rkey, parsePull);
    if (got === undefined || got.value.repo !== this.#o.repoUri) return;
    const last = got.value.rounds.length - 1;
    const round = got.value.rounds[last]!;
    if (this.#isDone(round.head) || this.#stopping) return;
    await this.#runOne({
      commit: round.head,
      branch: got.value.base,
      label: `of ${pullLabel(uri, author.handle)} (round ${last})`,
      pull: { uri, author, record: got.value },
    });
  }

  async #runOne(subject: Subject): Promise<void> {
    const { commit, branch, label } = subject;
    const short = commit.slice(0, 12);
    const logFile = path.join(this.#dir, 'logs', `${commit}.log`);
    this.#state.running = { commit, branch, ...(subject.pull ? { pull: subject.pull.uri } : {}), label };
    this.#save();
    await this.#write(commit, 'pending', `running on ${os.hostname()}`);
    this.#o.log(`${short} ${label}: pending`);
    let verdict: { state: CheckState; description: string };
    try {
      verdict = await this.#execute(subject, logFile);
    } catch (err) {
      // Whatever kept the command from running is this run's error, never a pending left behind.
      verdict = { state: 'error', description: describeOutput(errorText(err)) || 'the run failed' };
    }
    if (this.#stopping && verdict.state !== 'success' && verdict.state !== 'failure') {
      await this.#write(commit, 'error', STOPPED);
      this.#o.log(`${short} ${label}: error (stopped)`);
      delete this.#state.running;
      this.#save();
      return;
    }
    await this.#write(commit, verdict.state, verdict.description);
    this.#o.log(`${short} ${label}: ${verdict.state} (log: ${logFile})`);
    this.#markDone(commit, verdict.state);
    delete this.#state.running;
    this.#save();
  }

  /**
   * Fetches the commit into the cache (a branch from the owner's account; a round from its pack in
   * its author's, on the base branch's history), checks it out in a scratch tree and runs the
   * command there.
   */
  async #execute(subject: Subject, logFile: string): Promise<{ state: CheckState; description: string }> {
    const { commit, branch } = subject;
    const cache = path.join(this.#dir, 'cache.git');
    if (!fs.existsSync(path.join(cache, 'HEAD'))) await git(['init', '-q', '--bare', cache]);
    const url = `knotless://${this.#o.owner.did}/${this.#o.name}`;
    await git([
      '--git-dir',
      cache,
      'fetch',
      '-q',
      '--no-tags',
      url,
      `+refs/heads/${branch}:refs/runner/${branch}`,
    ]).catch((err: unknown) => {
      throw new RunFailure(`the commit could not be fetched: ${describeOutput(errorText(err))}`);
    });
    if (subject.pull !== undefined) await this.#fetchRound(cache, subject.pull, commit);
    const held = await git(['--git-dir', cache, 'cat-file', '-e', `${commit}^{commit}`]).then(
      () => true,
      () => false,
    );
    if (!held)
      throw new RunFailure(
        subject.pull === undefined
          ? `the branch ${branch} no longer holds the commit`
          : "the round's pack does not hold its commit",
      );
    const scratch = path.join(this.#dir, 'work');
    fs.rmSync(scratch, { recursive: true, force: true });
    await git(['--git-dir', cache, 'worktree', 'prune']);
    await git(['--git-dir', cache, 'worktree', 'add', '-q', '--detach', '-f', scratch, commit]);
    try {
      return await this.#command(subject, scratch, logFile);
    } finally {
      fs.rmSync(scratch, { recursive: true, force: true });
      await git(['--git-dir', cache, 'worktree', 'prune']);
    }
  }

  /**
   * Indexes a round's pack (from its author's PDS, checked against its CID and for bombs, as `pr
   * checkout` does) into the cache, holding it under a ref of its own so that git keeps it.
   */
  async #fetchRound(cache: string, pull: NonNullable<Subject['pull']>, head: string): Promise<void> {
    const round = pull.record.rounds.at(-1)!;
    try {
      const pack = await loadRoundPack(
        this.#ctx,
        pull.author,
        round.pack,
        new BlobCache(this.#ctx.config.cacheDir),
      );
      const { keepFile } = await indexPack(pack, cache, false);
      try {
        await checkRoundComplete(cache, head, ['--all'], `${this.#o.label}'s ${pull.record.base}`);
        const key = createHash('sha256').update(pull.uri).digest('hex').slice(0, 16);
        await git(['--git-dir', cache, 'update-ref', `refs/runner-pulls/${key}`, head]);
      } finally {
        fs.rmSync(keepFile, { force: true });
      }
    } catch (err) {
      throw new RunFailure(`the round could not be fetched: ${describeOutput(errorText(err))}`);
    }
  }

  #command(
    subject: Subject,
    cwd: string,
    logFile: string,
  ): Promise<{ state: CheckState; description: string }> {
    const { commit, branch } = subject;
    const fd = fs.openSync(logFile, 'w', 0o600);
    const [program, ...args] = this.#o.command;
    const child = spawn(program!, args, {
      cwd,
      // Its own process group, so that a time limit or Ctrl-C ends everything it started.
      detached: true,
      stdio: ['ignore', fd, fd],
      env: {
        ...process.env,
        KNOTLESS_RUNNER_REPO: `${this.#o.owner.did}/${this.#o.name}`,
        KNOTLESS_RUNNER_BRANCH: branch,
        KNOTLESS_RUNNER_COMMIT: commit,
        ...(subject.pull === undefined ? {} : { KNOTLESS_RUNNER_PULL: subject.pull.uri }),
      },
    });
    fs.closeSync(fd);
    return new Promise((resolve) => {
      let timedOut = false;
      const kill = (): void => {
        if (child.pid !== undefined) killGroup(child.pid);
      };
      if (child.pid !== undefined) {
        this.#child = { pid: child.pid, kill };
        this.#state.running = { ...this.#state.running!, pid: child.pid };
        this.#save();
      }
      const timer = setTimeout(() => {
        timedOut = true;
        kill();
      }, this.#o.timeoutMs);
      const done = (state: CheckState, why: string): void => {
        clearTimeout(timer);
        this.#child = undefined;
        // The whole group, whatever the command left running in the background.
        kill();
        const tail = describeOutput(tailOf(logFile));
        resolve({ state, description: tail === '' ? why : `${why}: ${tail}` });
      };
      child.on('error', (err) =>
        done('error', `the command could not be started (${describeOutput(err.message)})`),
      );
      child.on('exit', (code, signal) => {
        if (timedOut) done('error', `over the time limit of ${this.#o.timeoutMs / 1000} s`);
        else if (this.#stopping) done('error', 'stopped');
        else if (code === 0) done('success', 'passed');
        else done('failure', code === null ? `killed by ${signal ?? 'a signal'}` : `exit ${code}`);
      });
    });
  }

  /**
   * An event of the owner's PDS's stream: a commit of the owner's that touches this repository's
   * refs (or a sync, account or identity event of the owner's) asks for a scan; a pull request
   * written by any account on that PDS is read and run. The cursor is saved once they are done.
   */
  #ownerEvent(m: StreamEvent): void {
    const prefix = `${REF_COLLECTION}/${refKeyPrefix(this.#o.name)}`;
    // A push to a repository on its ref table rewrites the owner's table record, whatever it changed.
    const table = `${REFS_COLLECTION}/${refTableKey(this.#o.name, this.#o.owner.did, this.#o.owner.did)}`;
    const pulls = this.#pullsIn(m);
    if (m.did === this.#o.owner.did) {
      const concerns = m.t !== '#commit' || m.paths.some((p) => p.startsWith(prefix) || p === table);
      if (concerns) return this.#want(m.seq);
    }
    // A maintainer on the owner's PDS pushes by writing their own table there.
    if (this.#memberConcerns(m)) return this.#want(m.seq);
    if (pulls > 0 && m.seq !== undefined) this.#wantedUpTo = m.seq;
    if (pulls > 0) this.#wake?.();
  }

  /** An event of the relay's stream: a pull request written by any account is read and run. */
  #relayEvent(m: StreamEvent): void {
    if (m.seq !== undefined) this.#relayUpTo = m.seq;
    if (this.#pullsIn(m) > 0) this.#wake?.();
  }

  /** Queues the pull requests an event's commit creates or updates; returns how many. */
  #pullsIn(m: StreamEvent): number {
    if (m.t !== '#commit' || m.did === undefined) return 0;
    let n = 0;
    for (const p of m.paths) {
      const [collection, rkey, ...more] = p.split('/');
      if (collection !== PULL || rkey === undefined || more.length > 0) continue;
      this.#pulls.add(`at://${m.did}/${PULL}/${rkey}`);
      n++;
    }
    return n;
  }

  /**
   * Follows the event stream of `service` (a PDS or a relay) from the cursor `cursor` gives,
   * reconnecting until stopped; each event goes to `hear`. Opening it asks for a scan and for the
   * open pull requests: anything written while it was closed is found that way.
   */
  async #follow(
    service: string,
    cursor: () => number | undefined,
    hear: (m: StreamEvent) => void,
    /** Told each event's sequence number, for the cursor saved (none for a maintainer's PDS's stream). */
    delivered: ((seq: number) => void) | undefined,
    signal: AbortSignal = this.#abort.signal,
  ): Promise<void> {
    const { websocket, ensureChunkIsMessage } = await import('../agent/stream-libs.ts');
    let announced = false;
    const ws = websocket(
      () => {
        const base = `${service.replace(/\/+$/, '').replace(/^http/, 'ws')}/xrpc/${METHOD}`;
        const at = cursor();
        return at === undefined ? base : `${base}?cursor=${at}`;
      },
      {
        dataMode: 'binary',
        heartbeat: {},
        signal: signal === this.#abort.signal ? signal : AbortSignal.any([this.#abort.signal, signal]),
        onOpen: () => {
          // Anything pushed while the connection opened is found by a scan made after it.
          this.#listPulls = true;
          this.#want(undefined);
          if (!announced && service === this.#o.owner.pds)
            this.#o.log(
              `watching ${this.#o.label} for ${safeText(this.#o.context)} (state and logs: ${this.#dir})`,
            );
          announced = true;
        },
        onReconnect: (err) =>
          this.#o.log(
            `event stream${service === this.#o.owner.pds ? '' : ` of ${safeText(service)}`}: ${safeText(errorText(err))}; reconnecting`,
          ),
      },
    );
    try {
      for await (const chunk of ws) {
        const message = ensureChunkIsMessage(chunk);
        const body = message.body as Record<string, unknown>;
        const seq = typeof body['seq'] === 'number' ? body['seq'] : undefined;
        if (seq !== undefined) delivered?.(seq);
        const did = typeof body['repo'] === 'string' ? body['repo'] : body['did'];
        const ops = Array.isArray(body['ops'])
          ? (body['ops'] as Array<{ path?: unknown; action?: unknown }>)
          : [];
        hear({
          t: message.header.t,
          seq,
          did: typeof did === 'string' ? did : undefined,
          // A deleted record has nothing to run.
          paths: ops
            .filter((o) => o.action !== 'delete')
            .map((o) => o.path)
            .filter((p): p is string => typeof p === 'string'),
        });
      }
    } catch (err) {
      if (!this.#abort.signal.aborted && !signal.aborted) throw err;
    }
  }
}

/** What the runner reads of a stream's event. */
interface StreamEvent {
  t: string | undefined;
  seq: number | undefined;
  did: string | undefined;
  paths: string[];
}

/** A pull request as the lines name it: `pull request <author>/<key>`, escaped. */
function pullLabel(uri: string, handle?: string): string {
  const at = parseAtUri(uri);
  if (at === undefined) return `pull request ${safeText(uri)}`;
  return `pull request ${safeText(handle ?? at.did)}/${safeText(at.rkey)}`;
}

/** A run that could not be made (the commit could not be fetched, say): its verdict is `error`. */
class RunFailure extends Error {}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch (err) {
    // Already gone: nothing is left to end.
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The last 64 KiB of the log. */
function tailOf(file: string): string {
  const size = fs.statSync(file).size;
  const fd = fs.openSync(file, 'r');
  try {
    const length = Math.min(size, 65536);
    const buf = Buffer.alloc(length);
    fs.readSync(fd, buf, 0, length, size - length);
    return buf.toString('utf8');
  } finally {
    fs.closeSync(fd);
  }
}

/** Runs git (with the helper for knotless:// on PATH, as the user has it); rejects with its stderr. */
function git(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-4096)));
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(stderr.trim() || `git ${args[2] ?? ''} exited ${code}`)),
    );
  });
}
