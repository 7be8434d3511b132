import { KnotlessError } from 'knotless-core/errors';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { RefView } from 'knotless-core/cache/ref-view';
import { compactRef, compactTableRef, type CompactEnv, type TableCursor } from 'knotless-core/ops/compact';
import { compactionMarker, releaseMarker } from 'knotless-core/ops/compact-marker';
import { lastTableRead, readRepoRefs } from 'knotless-core/records/read-refs';
import { refsByName, type RemoteRef, type RemoteRepo } from 'knotless-core/records/remote-repo';
import { safeText } from 'knotless-core/text/terminal';
import type { Context } from '../../context.ts';
import type { Command } from '../command.ts';
import type { Io } from '../io.ts';
import { ownRepo } from './owner.ts';

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
    const { auth, remote } = await ownRepo(c, args.positionals[0]!, 'compact', io);
    const ref = args.values['ref'];
    const wanted = Array.isArray(ref) ? ref : undefined;
    const env = { auth, cache: new BlobCache(c.config.cacheDir), cacheDir: c.config.cacheDir };
    let changed: number;
    // A helper that started this compaction in the background left a marker for it: gone when done.
    const marker = compactionMarker(c.config.cacheDir, remote.owner.did, remote.name);
    try {
      // A ref that several records claim is not compacted: that would be writing one of them.
      // Read as every reader reads them: a repository on a ref table is compacted in its table.
      const all = [...refsByName(await readRepoRefs(remote)).byName.values()];
      // A --ref that names nothing is a typo (`main` for refs/heads/main), not "nothing to compact".
      // Not with --quiet: the background compaction after a push names refs that may be gone since.
      const unknown = wanted?.find((w) => !all.some((r) => r.record.ref === w));
      if (unknown !== undefined && args.values['quiet'] !== true) {
        throw new KnotlessError(
          'not-found',
          `${remote.label} has no ref ${safeText(unknown)}; name refs in full, e.g. refs/heads/main (\`git ls-remote\` lists them).`,
        );
      }
      const refs = all.filter(
        (r) => r.record.target !== undefined && (wanted === undefined || wanted.includes(r.record.ref)),
      );
      changed = await compactAll(c, remote, env, refs, args.values['quiet'] === true, io);
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
): Promise<number> {
  let changed = 0;
  const table = lastTableRead(remote);
  const cursor: TableCursor | undefined = table === undefined ? undefined : { read: table };
  for (const r of refs) {
    const done =
      cursor === undefined
        ? await compactRef(remote, env, r.key)
        : await compactTableRef(remote, env, r.record.ref, cursor);
    if (done === undefined) continue;
    changed++;
    // Keep this machine's view current, so the next push's compare-and-swap does not miss.
    const view = new RefView(c.config.cacheDir, remote.owner.did, remote.name);
    const seen = view.read();
    if (seen?.refs.some((x) => x.key === r.key && x.cid === done.replacedCid)) {
      view.write({ ...seen, refs: seen.refs.map((x) => (x.key === r.key ? done.written : x)) });
    }
    if (!quiet) io.err(`${safeText(done.ref)}: ${done.before} packs → ${done.after}`);
  }
  return changed;
}
