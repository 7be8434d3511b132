import { refKey } from 'knotless-core/records/ref-key';
import { parseRepoSpec } from 'knotless-core/records/name';
import { readRefTable } from 'knotless-core/records/read-refs';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, type Command } from '../command.ts';
import { ownerOf } from './owner.ts';

export const command: Command = {
  name: 'repo info',
  args: '<[handle/]name>',
  summary: 'show one repository: description, owner, refs, clone command',
  options: { json: JSON_OPTION },
  positionals: { min: 1, max: 1 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const spec = parseRepoSpec(args.positionals[0]!);
    const owner = await ownerOf(c, spec.owner);
    const records = c.repoRecords();
    const remote = c.remoteRepo(owner, spec.name, (m) => io.err(`knotless: warning: ${m}`));
    const [record, keys, table] = await Promise.all([
      records.get(owner, spec.name),
      records.refKeys(owner, spec.name),
      readRefTable(remote),
    ]);
    // HEAD is a record too, but not a ref anyone would count. A repository with a ref table counts
    // the table's refs (its older ref records are ignored); else its ref records: a private
    // repository's keys name nothing, and its HEAD is the one record the first push adds beside its
    // branches.
    const refs =
      table !== undefined
        ? table.table.refs.filter((r) => r.target !== undefined)
        : record.private === undefined
          ? keys.filter((k) => k !== refKey(spec.name, 'HEAD'))
          : keys.slice(1);
    const label = owner.handle ?? owner.did;
    const url = `knotless://${label}/${spec.name}`;
    if (args.values['json'] === true) {
      io.out(
        safeJson({
          owner: owner.did,
          handle: owner.handle,
          name: spec.name,
          ...record,
          refs: refs.length,
          url,
        }),
      );
      return;
    }
    // Every field but the count came from the network: each is escaped where it is printed.
    io.out(`${safeText(label)}/${safeText(spec.name)}`);
    if (record.description) io.out(`  description  ${safeText(record.description, 1000)}`);
    io.out(`  created      ${safeText(record.createdAt)}`);
    io.out(`  owner        ${safeText(owner.did)}`);
    io.out(`  refs         ${refs.length}`);
    if (record.private !== undefined)
      io.out(`  private      members ${record.private.members.map((m) => safeText(m)).join(', ')}`);
    io.out(`  clone        git clone ${safeText(url)}`);
  },
};
