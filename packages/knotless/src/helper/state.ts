import { RefView } from 'knotless-core/cache/ref-view';
import type { Context } from '../context.ts';
import { KnotlessError } from 'knotless-core/errors';
import {
  lastTableRead,
  parseMemberRead,
  parseTableRead,
  readRepoRefs,
  tableRefs,
  teamOf,
  teamRemoteRefs,
  useTableRead,
  useTeamRead,
  type MemberTable,
  type TableRead,
  type TeamRead,
} from 'knotless-core/records/read-refs';
import { maintainersOf } from 'knotless-core/records/ref-table';
import type { WireMember } from '../agent/views.ts';
import { refsByName, type RemoteRef, type RemoteRepo } from 'knotless-core/records/remote-repo';
import { printErr, safeText } from 'knotless-core/text/terminal';
import type { PushOptions } from 'knotless-core/ops/push/job';
import type { Chatter } from 'knotless-core/text/progress';
import type { KnotlessUrl } from 'knotless-core/records/knotless-url';

/** Options git set with `option`: how chatty to be, and what it asked of a push. */
export interface HelperOptions extends Chatter, PushOptions {}

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
  /** The options git set that only upload-pack can answer (a shallow or partial fetch), as a user names them. */
  needsUploadPack: string | undefined;
  #remote: RemoteRepo | undefined;
  /** The refs as last listed, by name (HEAD included); a ref several records claim is not here. */
  refs: Map<string, RemoteRef> | undefined;
  /** Refs that several records claim, as last listed: never fetched, pushed only to delete them. */
  contested = new Map<string, RemoteRef[]>();
  /** What git was shown from the agent's view, until a write or {@link checkView} proves it. */
  #unproven: RemoteRef[] | undefined;

  constructor(ctx: Context, url: KnotlessUrl) {
    this.ctx = ctx;
    this.url = url;
  }

  /** The remote repository, resolving its owner on first use (from the identity cache when fresh). */
  async remote(): Promise<RemoteRepo> {
    if (this.#remote === undefined) {
      const owner = await this.ctx.resolver.resolve(this.url.owner);
      this.#remote = this.ctx.remoteRepo(owner, this.url.repo, (m) => printErr(`knotless: warning: ${m}`));
    }
    return this.#remote;
  }

  /**
   * The refs, for git's `list` or `list for-push`. git decides "up to date", deletes, prunes and
   * leases locally from this answer, before any compare-and-swap can run, so it must be true: it is
   * a listing (one request per 100 refs; an empty one also checks that the repository exists), or,
   * for a push, the warm agent's view. A view the agent gives with the commit it is complete at is
   * answered at once and proven afterwards: the push's first ref write carries that commit as
   * `swapCommit` (RemoteRepo.viewProof), and when no write proved it, {@link checkView} reads once
   * before the helper exits. A view without one the agent shows current first (a read).
   * A cached view is never enough on its age alone: another machine may have moved a ref a moment ago.
   */
  async list(forPush: boolean): Promise<Map<string, RemoteRef>> {
    const remote = await this.remote();
    const fromAgent = forPush
      ? await this.ctx.agent?.view(remote.owner.did, remote.name, remote.owner.pds)
      : undefined;
    if (fromAgent?.uploads !== undefined)
      this.ctx.uploadBudgets.keep(fromAgent.uploads.service, fromAgent.uploads.status);
    const team =
      fromAgent?.table === undefined || fromAgent.members === undefined
        ? undefined
        : await this.#team(remote, fromAgent.table, fromAgent.members);
    if (fromAgent?.table !== undefined && (fromAgent.members === undefined || team !== undefined)) {
      // A view of a ref table: parsed and its parts checked as a read's are. The push's one write of
      // the table, swapped on this CID, proves the whole listing (ops/push/table.ts). A team's: the
      // refs computed from every writer's table with the rule, as a cold read computes them; its push
      // swaps on the pusher's own table and reads every other writer's after it (team-push.ts).
      const { table } = fromAgent;
      const read = parseTableRead(remote.owner.did, remote.name, remote.label, table, table.parts);
      if (team === undefined) useTableRead(remote, { ...read, signingKey: undefined });
      else useTeamRead(remote, team);
      await remote.prepare('plain');
      remote.viewProof = { commit: read.cid, state: 'pending' };
      const refs =
        team === undefined
          ? tableRefs(remote, { ...read, signingKey: undefined })
          : teamRemoteRefs(remote, team);
      this.#unproven = refs;
      await this.ctx.resolver.settle();
      return this.#keep(refs);
    }
    if (fromAgent !== undefined) {
      // The agent keeps views of public repositories only (their records are plain): as a plain
      // listing does, that settles the question without reading the repository record.
      await remote.prepare(fromAgent.refs.length > 0 ? 'plain' : 'none');
      if (fromAgent.commit !== undefined) {
        remote.viewProof = { commit: fromAgent.commit, state: 'pending' };
        this.#unproven = fromAgent.refs;
      }
      // The owner's handle, when it came from the cache, is verified afresh before git sees anything.
      await this.ctx.resolver.settle();
      return this.#keep(fromAgent.refs);
    }
    const refs = await readRepoRefs(remote);
    if (refs.length === 0 && !(await remote.exists())) {
      throw new KnotlessError(
        'repo-missing',
        `${remote.label} does not exist; create it with \`knotless repo create ${remote.name}\` (as its owner) and try again.`,
      );
    }
    // Kept for `knotless repo commit`, which writes with compare-and-swap and lets no one decide locally;
    // never for a private repository, whose records this cache would hold opened.
    // Nor for a ref table, which `repo commit` does not write yet.
    if (!remote.isPrivate && remote.layout === 'records') this.#view(remote).write({ refs });
    return this.#keep(refs);
  }

  /**
   * Before the helper exits: when git was shown a view no write proved (git sent no push command, or
   * none of its writes carried the view's commit and landed), lists once and compares. When git sent
   * nothing, a ref that moved may have been judged "up to date" (or refused) on a stale view: the
   * push fails with one sentence rather than exit 0 on a judgement never true. When git sent
   * commands, their refs were judged on swaps; which others git looked at the helper cannot tell (git
   * does not send its refspecs), so the moved ones are named in a warning.
   */
  async checkView(pushed: ReadonlySet<string>): Promise<void> {
    const shown = this.#unproven;
    const remote = this.#remote;
    if (shown === undefined || remote?.viewProof === undefined || remote.viewProof.state === 'proven') return;
    this.#unproven = undefined;
    let now: RemoteRef[];
    try {
      // A table this push read again, or wrote, after the view it was shown: the refs as they are
      // now, proved by that read or that write, at no further request.
      const last = lastTableRead(remote);
      now =
        remote.layout !== 'table'
          ? await remote.listRefs()
          : last !== undefined && last.cid !== remote.viewProof.commit
            ? tableRefs(remote, last)
            : await readRepoRefs(remote);
    } catch (err) {
      // Refs git sent were written and reported: a failed check must not turn them into a failure.
      if (pushed.size === 0 || !(err instanceof KnotlessError)) throw err;
      printErr(
        `knotless: warning: ${remote.label} could not be read again after this push (${err.message.replace(/\.$/, '')}); what git printed of refs it did not push may be out of date.`,
      );
      return;
    }
    const before = new Map(shown.map((r) => [r.key, r]));
    const after = new Map(now.map((r) => [r.key, r]));
    const moved = new Set<string>();
    for (const key of new Set([...before.keys(), ...after.keys()])) {
      const was = before.get(key);
      const is = after.get(key);
      // A table's refs all carry the table's CID: one of them moved when its value did.
      if (remote.layout === 'table' ? sameValue(was, is) : was?.cid === is?.cid) continue;
      const name = (was ?? is)!.record.ref;
      // git decides nothing about HEAD in a push, and judged its own refs' writes on swaps.
      if (name !== 'HEAD' && !pushed.has(name)) moved.add(name);
    }
    if (moved.size === 0) return;
    const names = [...moved].slice(0, 3).map((n) => safeText(n));
    if (pushed.size > 0) {
      printErr(
        `knotless: warning: ${remote.label} changed while git was deciding this push (${names.join(', ')}${moved.size > 3 ? ', …' : ''}); what git printed of refs it did not push may be out of date.`,
      );
      return;
    }
    throw new KnotlessError(
      'push-rejected',
      `${remote.label} changed while git was deciding this push (${names.join(', ')}${moved.size > 3 ? ', …' : ''}), so what git judged of those refs may be wrong; run \`git fetch\` and push again.`,
    );
  }

  /**
   * A team from the agent's view: the owner's table and each maintainer's, parsed and checked as a
   * read's are. Undefined (the helper lists for itself) when the maintainers the view holds are not
   * exactly those the owner's table names.
   */
  async #team(
    remote: RemoteRepo,
    table: WireMember['table'] & object,
    members: WireMember[],
  ): Promise<TeamRead | undefined> {
    const read = parseTableRead(remote.owner.did, remote.name, remote.label, table, table.parts);
    const owner: TableRead = { ...read, signingKey: undefined };
    const named = maintainersOf(owner.table, remote.owner.did);
    const held = new Set(members.map((m) => m.did));
    if (named.length !== held.size || !named.every((did) => held.has(did))) return undefined;
    const tables = await Promise.all(
      members.map(async (m): Promise<MemberTable> => {
        const member = await remote.member(m.did);
        if (member === undefined)
          throw new Error(`${remote.label} was opened without a way to read maintainers`);
        const name = member.owner.handle ?? m.did;
        const label = `${name}'s refs of ${remote.label}`;
        const got =
          m.table === null
            ? undefined
            : parseMemberRead(remote.owner.did, remote.name, label, m.table, m.table.parts);
        return { did: m.did, name, remote: member, read: got };
      }),
    );
    return teamOf(remote, owner, tables);
  }

  /** Takes a listing's records as the refs, each ref that several records claim set apart. */
  #keep(records: RemoteRef[]): Map<string, RemoteRef> {
    const { byName, contested } = refsByName(records);
    this.contested = contested;
    this.refs = byName;
    return byName;
  }

  /**
   * Folds a push's results into the view: refs written with their new CIDs, deleted refs gone. A
   * write whose new CID is unknown (an atomic batch) leaves its ref as it was listed: `repo commit`'s
   * compare-and-swap then meets a conflict and reads the record again.
   */
  async remember(
    written: Array<{ dst: string; error?: string; record?: RemoteRef | null; conflicted?: boolean }>,
  ): Promise<void> {
    const remote = await this.remote();
    const deletedKeys = written
      .filter((w) => w.error === undefined && w.record === null)
      .flatMap((w) => [this.refs?.get(w.dst)?.key, ...(this.contested.get(w.dst) ?? []).map((r) => r.key)]);
    if (this.refs === undefined) return;
    for (const w of written) {
      if (w.error !== undefined) continue;
      if (w.record === null) this.contested.delete(w.dst);
      if (w.record === null) this.refs.delete(w.dst);
      else if (w.record !== undefined) this.refs.set(w.dst, w.record);
    }
    // Other processes (agents pushing other branches) write this view too: fold our writes into what
    // is on disk rather than putting back the refs as we listed them, which may be older than theirs.
    // Not in the warm agent: its own view took the write when it landed, and `knotless repo commit`
    // asks it first; reading and rewriting this file cost its event loop ~5 ms a push under load.
    // Nor for a ref table: the view on disk holds ref records, for `repo commit`, which reads a table afresh.
    if (!remote.isPrivate && !this.ctx.hosted && remote.layout !== 'table')
      this.#fold(remote, written, this.refs);
    try {
      await this.ctx.agent?.wrote(remote.owner.did, remote.name, {
        written: written.flatMap((w) => (w.error === undefined && w.record ? [w.record] : [])),
        deleted: deletedKeys.filter((k): k is string => k !== undefined),
        // A conflict on a view the push found behind (its commit's swap refused) says only that
        // the agent's stream had not delivered the latest commit yet: the view catches up by itself.
        invalidate: written.some((w) => w.conflicted === true) && remote.viewProof?.state !== 'broken',
        ...(remote.layout !== 'table' && remote.viewProof !== undefined && remote.viewProvedInto !== undefined
          ? {
              head: {
                from: remote.viewProof.commit,
                to: remote.viewProvedInto.commit,
                rev: remote.viewProvedInto.rev,
              },
            }
          : {}),
      });
    } catch (err) {
      // The push is done and must say so: failing it would tell git a written ref was not. The
      // agent loses nothing it needs: it serves a view only once its event stream has caught up.
      printErr(`knotless: warning: the warm agent was not told of this push (${safeText(String(err))})`);
    }
  }

  /** Folds a push's writes into this machine's view on disk (see {@link remember}). */
  #fold(
    remote: RemoteRepo,
    written: Array<{ dst: string; error?: string; record?: RemoteRef | null }>,
    refs: Map<string, RemoteRef>,
  ): void {
    const view = this.#view(remote);
    const onDisk = view.read();
    const apart = [...this.contested.values()].flat();
    if (onDisk === undefined) view.write({ refs: [...refs.values(), ...apart] });
    else {
      // By record key, not ref name: the records of a ref that several claim all stay in the view.
      const merged = new Map(onDisk.refs.map((r) => [r.key, r]));
      for (const w of written) {
        if (w.error !== undefined || w.record === undefined) continue;
        for (const r of onDisk.refs) if (r.record.ref === w.dst) merged.delete(r.key);
        if (w.record !== null) merged.set(w.record.key, w.record);
      }
      view.write({ refs: [...merged.values()] });
    }
  }

  #view(remote: RemoteRepo): RefView {
    return new RefView(this.ctx.config.cacheDir, remote.owner.did, remote.name);
  }
}

/** Whether two refs read from ref tables say the same to git (target, peeled id, symbolic ref). */
function sameValue(a: RemoteRef | undefined, b: RemoteRef | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  // What git judged a ref by: its value, not the packs it is stored in (a compaction moves those).
  const of = (r: RemoteRef) => JSON.stringify([r.record.target, r.record.peeled, r.record.symref]);
  return of(a) === of(b);
}
