import { KnotlessError } from 'knotless-core/errors';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { RefView } from 'knotless-core/cache/ref-view';
import { compactRef, compactTableRef, type CompactEnv, type TableCursor } from 'knotless-core/ops/compact';
import { compactionMarker, releaseMarker } from 'knotless-core/ops/compact-marker';
import { lastTableRead, lastTeamRead, readRepoRefs, tableRefs } from 'knotless-core/records/read-refs';
import { refTableKey } from 'knotless-core/records/ref-table';
import { refsByName, type RemoteRef, type RemoteRepo } from 'knotless-core/records/remote-repo';
import { safeText } from 'knotless-core/text/terminal';
import type { Context } from '../../context.ts';
import type { Command } from '../command.ts';
import type { Io } from '../io.ts';
import { namedRepo } from './owner.ts';

export const command: Command = {
  name: 'repo compact',
  args: '<[handle/]name>',
  summary: "merge a repository's small packs (runs by itself after pushes)",
  options: {
    ref: { type: 'string', multiple: true, value: 'REF', help: 'only this ref, e.g. refs/heads/main' },
    quiet: { type: 'boolean', short: 'q', help: 'print nothing' },
  },
  positionals: { min: 1, max: 1 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const { auth, remote } = await namedRepo(c, args.positionals[0]!, io);
    const ref = args.values['ref'];
    const wanted = Array.isArray(ref) ? ref : undefined;
    const env = { auth, cache: new BlobCache(c.config.cacheDir), cacheDir: c.config.cacheDir };
    let changed: number;
    // A helper that started this compaction in the background left a marker for it: gone when done.
    const marker = compactionMarker(c.config.cacheDir, remote.owner.did, remote.name);
    try {
      // A ref that several records claim is not compacted: that would be writing one of them.
      // Read as every reader reads them: a repository on a ref table is compacted in its table.
      const listed = [...refsByName(await readRepoRefs(remote)).byName.values()];
      // A maintainer compacts their own table of the repository, whose packs are in their account.
      const mine = maintainerTable(remote, auth.session);
      const all = mine?.refs ?? listed;
      // A --ref that names nothing is a typo (`main` for refs/heads/main), not "nothing to compact".
      // Not with --quiet: the background compaction after a push names refs that may be gone since.
      const unknown = wanted?.find((w) => !all.some((r) => r.record.ref === w));
      if (unknown !== undefined && args.values['quiet'] !== true) {
        // A maintainer's own table holds only what they pushed: a ref others hold is theirs to compact.
        if (mine !== undefined && listed.some((r) => r.record.ref === unknown))
          throw new KnotlessError(
            'not-found',
            `${safeText(unknown)} of ${remote.label} is not in your own table of it (you have not pushed it), and a maintainer compacts only what they pushed; its packs are in the account of whoever last pushed it, who can compact them.`,
          );
        throw new KnotlessError(
          'not-found',
          `${remote.label} has no ref ${safeText(unknown)}; name refs in full, e.g. refs/heads/main (\`git ls-remote\` lists them).`,
        );
      }
      const refs = all.filter(
        (r) => r.record.target !== undefined && (wanted === undefined || wanted.includes(r.record.ref)),
      );
      changed = await compactAll(c, remote, env, refs, args.values['quiet'] === true, io, mine?.cursor);
    } finally {
      releaseMarker(marker);
    }
    if (args.values['quiet'] !== true && changed === 0) io.err(`Nothing to compact in ${remote.label}.`);
  },
};

/** Compacts each ref in turn; returns how many changed. */
async function compactAll(
  c: Context,
  remote: RemoteRepo,
  env: CompactEnv,
  refs: RemoteRef[],
  quiet: boolean,
  io: Io,
  maintainer: TableCursor | undefined,
): Promise<number> {
  let changed = 0;
  const table = lastTableRead(remote);
  const cursor: TableCursor | undefined = maintainer ?? (table === undefined ? undefined : { read: table });
  for (const r of refs) {
    const done =
      cursor === undefined
        ? await compactRef(remote, env, r.key)
        : await compactTableRef(remote, env, r.record.ref, cursor);
    if (done === undefined) continue;
    changed++;
    if (!quiet) io.err(`${safeText(done.ref)}: ${done.before} packs → ${done.after}`);
    if (maintainer !== undefined) continue;
    // Keep this machine's view current, so the next push's compare-and-swap does not miss.
    const view = new RefView(c.config.cacheDir, remote.owner.did, remote.name);
    const seen = view.read();
    if (seen?.refs.some((x) => x.key === r.key && x.cid === done.replacedCid)) {
      view.write({ ...seen, refs: seen.refs.map((x) => (x.key === r.key ? done.written : x)) });
    }
  }
  return changed;
}

/**
 * The session's own table of someone else's repository, when the owner's table names them a
 * maintainer, with the cursor a compaction of it starts from; undefined for the owner. Anyone else
 * is refused: only the owner and the maintainers have packs of the repository to compact.
 */
function maintainerTable(
  remote: RemoteRepo,
  session: { did: string; handle: string },
): { refs: RemoteRef[]; cursor: TableCursor } | undefined {
  if (remote.owner.did === session.did) return undefined;
  const member = lastTeamRead(remote)?.members.find((m) => m.did === session.did);
  if (member === undefined)
    throw new KnotlessError(
      'permission-denied',
      `Only ${safeText(remote.owner.handle ?? remote.owner.did)} and the maintainers of ${remote.label} can compact it; you are ${safeText(session.handle)}.`,
    );
  return {
    // None when they have pushed nothing to it yet.
    refs: member.read === undefined ? [] : tableRefs(member.remote, member.read),
    cursor: {
      read: member.read,
      maintainer: {
        did: session.did,
        remote: member.remote,
        key: refTableKey(remote.name, remote.owner.did, session.did),
      },
    },
  };
}
