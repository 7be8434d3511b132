import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, type Command } from '../command.ts';
import { currentDid } from '../forge-shared.ts';
import { ownerOf } from './owner.ts';

export const command: Command = {
  name: 'repo list',
  args: '[handle]',
  summary: "list an account's repositories (yours when no handle is given)",
  options: { json: JSON_OPTION },
  positionals: { min: 0, max: 1 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const owner = await ownerOf(c, args.positionals[0]);
    const repos = await c.repoRecords().list(owner);
    if (args.values['json'] === true) {
      io.out(safeJson(repos.map((r) => ({ name: r.name, ...r.record }))));
      return;
    }
    const label = safeText(owner.handle ?? owner.did);
    // Creating one is suggested only to the account itself: `repo create` makes it in yours.
    if (repos.length === 0)
      io.err(
        owner.did === (await currentDid(c))
          ? `${label} has no repositories yet; create one with \`knotless repo create <name>\`.`
          : `${label} has no repositories yet.`,
      );
    // Names and descriptions come from the network: escaped before they are measured or printed.
    const rows = repos.map((r) => ({
      name: safeText(r.name),
      description: r.record.description === undefined ? '' : safeText(r.record.description),
    }));
    const width = Math.max(0, ...rows.map((r) => r.name.length));
    for (const r of rows) io.out(r.description ? `${r.name.padEnd(width)}  ${r.description}` : r.name);
  },
};
