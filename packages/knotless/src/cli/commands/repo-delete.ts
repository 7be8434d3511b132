import { forgetRing } from 'knotless-core/private/ring';
import { activeSession } from '../../auth/login.ts';
import { KnotlessError, isKnotlessError } from 'knotless-core/errors';
import { readRefTable } from 'knotless-core/records/read-refs';
import { parseRepoSpec } from 'knotless-core/records/name';
import { safeText } from 'knotless-core/text/terminal';
import type { Command } from '../command.ts';
import { confirm } from '../prompt.ts';

export const command: Command = {
  name: 'repo delete',
  args: '<name>',
  summary: 'delete one of your repositories and all its refs',
  options: { yes: { type: 'boolean', short: 'y', help: 'do not ask for confirmation' } },
  positionals: { min: 1, max: 1 },
  async run({ ctx, io, args }) {
    const spec = parseRepoSpec(args.positionals[0]!);
    const name = spec.name;
    const c = ctx();
    const auth = await activeSession(c);
    const owner = { did: auth.session.did, handle: auth.session.handle, pds: auth.session.pds };
    // `alice.test/site` is taken when it names your own account, as every other repo command does.
    if (spec.owner !== undefined && (await c.resolver.resolve(spec.owner)).did !== owner.did) {
      throw new KnotlessError(
        'permission-denied',
        `You can delete only your own repositories, and ${safeText(spec.owner)}/${name} is not yours (you are ${safeText(owner.handle)}).`,
      );
    }
    const records = c.repoRecords();
    await records.get(owner, name);
    if (args.values['yes'] !== true) {
      if (!io.interactive) {
        throw new KnotlessError(
          'usage',
          `Deleting ${name} cannot be undone; pass --yes to confirm when not at a terminal.`,
        );
      }
      if (
        !(await confirm(
          io,
          `Delete ${owner.handle}/${name} and all its branches and tags? This cannot be undone.`,
        ))
      ) {
        throw new KnotlessError('cancelled', 'Nothing deleted.');
      }
    }
    // A repository on a ref table has its refs there (its ref records, if any, are ignored ones). A
    // table that cannot be read is deleted all the same: deleting is how one is got rid of.
    const remote = c.remoteRepo(owner, name, (m) => io.err(`knotless: warning: ${m}`));
    const table = await readRefTable(remote).catch((err: unknown) => {
      if (isKnotlessError(err, 'corrupt-remote') || isKnotlessError(err, 'unverified-remote')) return null;
      throw err;
    });
    const recordRefs = await records.delete(auth, owner, name);
    // Its key ring goes too: a new repository of that name is a new repository, public or private.
    forgetRing(c.config.configDir, owner.did, name);
    const refs =
      table === undefined ? recordRefs : table?.table.refs.filter((r) => r.target !== undefined).length;
    io.err(
      refs === undefined
        ? `Deleted ${owner.handle}/${name} (its ref table, which could not be read, with it).`
        : `Deleted ${owner.handle}/${name} (${refs} ref${refs === 1 ? '' : 's'}).`,
    );
  },
};
