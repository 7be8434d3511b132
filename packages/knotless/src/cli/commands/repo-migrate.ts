import { RefView } from 'knotless-core/cache/ref-view';
import { migrateToTable } from 'knotless-core/ops/table-migrate';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, type Command } from '../command.ts';
import { ownRepo } from './owner.ts';

export const command: Command = {
  name: 'repo migrate',
  args: '<[handle/]name>',
  summary: "move a repository's refs into its ref table (one record), deleting its ref records",
  options: { json: JSON_OPTION },
  examples: ['knotless repo migrate site'],
  positionals: { min: 1, max: 1 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const { auth, remote } = await ownRepo(c, args.positionals[0]!, 'migrate', io);
    const done = await migrateToTable(remote, auth);
    // The view this machine cached of the old records must not be believed by `repo commit` again.
    new RefView(c.config.cacheDir, remote.owner.did, remote.name).clear();
    if (args.values['json'] === true) {
      io.out(
        safeJson({
          repo: remote.label,
          refs: done.refs,
          head: done.head ?? null,
          created: done.created,
          parts: done.parts,
          deleted: done.deleted,
          writes: done.requests,
          points: done.points,
        }),
      );
      return;
    }
    const head =
      done.head === undefined ? '' : ` and HEAD (${safeText(done.head.replace(/^refs\/heads\//, ''))})`;
    io.err(
      done.created
        ? `${remote.label}: ${done.refs} ref(s)${head} moved into its ref table${done.parts > 0 ? ` (${done.parts} part record(s))` : ''}; ${done.deleted} old ref record(s) deleted; ${done.points} point(s) spent in ${done.requests} write(s).`
        : `${remote.label} already keeps its ${done.refs} ref(s) in a ref table; ${done.deleted} leftover ref record(s) deleted; ${done.points} point(s) spent in ${done.requests} write(s).`,
    );
  },
};
