import { RepoRecords } from '../../repo/records.ts';
import { JSON_OPTION, type Command } from '../command.ts';
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
    const repos = await new RepoRecords(c).list(owner);
    if (args.values['json'] === true) {
      io.out(JSON.stringify(repos.map((r) => ({ name: r.name, ...r.record }))));
      return;
    }
    const label = owner.handle ?? owner.did;
    if (repos.length === 0)
      io.err(`${label} has no repositories yet; create one with \`knotless repo create <name>\`.`);
    const width = Math.max(0, ...repos.map((r) => r.name.length));
    for (const r of repos)
      io.out(r.record.description ? `${r.name.padEnd(width)}  ${r.record.description}` : r.name);
  },
};
