import { refKey } from 'knotless-core/records/ref-key';
import { parseRepoSpec } from 'knotless-core/records/name';
import { divergentName, readRefSource, readTeamRefs, type TeamRead } from 'knotless-core/records/read-refs';
import { maintainersOf } from 'knotless-core/records/ref-table';
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
    // The refs as every reader reads them: the owner's verified table, else the ref records proved
    // whole (their keys are all that is counted: a private repository's are not opened here).
    const [record, source] = await Promise.all([records.get(owner, spec.name), readRefSource(remote)]);
    const table = source.table;
    const keys =
      source.table === undefined ? source.records.map((r) => r.uri.slice(r.uri.lastIndexOf('/') + 1)) : [];
    // A repository with maintainers: its refs are computed from every writer's table (one warning
    // for each maintainer whose table cannot be read), as every other reader computes them.
    const team =
      table !== undefined && maintainersOf(table.table, owner.did).length > 0
        ? await readTeamRefs(remote, table)
        : undefined;
    // HEAD is a record too, but not a ref anyone would count. A team counts the refs the rule computes;
    // a repository with a ref table counts the table's refs (its older ref records are ignored); else its ref records: a private
    // repository's keys name nothing, and its HEAD is the one record the first push adds beside its
    // branches.
    const refs =
      team !== undefined
        ? [...team.refs.values()].filter((r) => r.target !== undefined)
        : table !== undefined
          ? table.table.refs.filter((r) => r.target !== undefined)
          : record.private === undefined
            ? keys.filter((k) => k !== refKey(spec.name, 'HEAD'))
            : keys.slice(1);
    const label = owner.handle ?? owner.did;
    const url = `knotless://${label}/${spec.name}`;
    const diverged = team === undefined ? undefined : divergences(team, owner.did, label);
    if (args.values['json'] === true) {
      io.out(
        safeJson({
          owner: owner.did,
          handle: owner.handle,
          name: spec.name,
          ...record,
          refs: refs.length,
          ...(diverged === undefined ? {} : { diverged }),
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
    for (const d of diverged ?? []) {
      io.out(`  diverged     ${safeText(d.ref)}`);
      for (const [i, v] of d.values.entries()) {
        const where =
          i === 0
            ? "the repository's value"
            : v.listedAs === undefined
              ? 'not listed'
              : `listed as ${safeText(v.listedAs)}`;
        io.out(`               ${v.target ?? 'deleted'} by ${safeText(v.by)}, ${where}`);
      }
    }
    if (record.private !== undefined)
      io.out(`  private      members ${record.private.members.map((m) => safeText(m)).join(', ')}`);
    io.out(`  clone        git clone ${safeText(url)}`);
  },
};

/** A ref no writer's value holds against all the others': every value, who wrote it, and where it is listed. */
interface Diverged {
  ref: string;
  values: { target: string | null; by: string; did: string; listedAs?: string }[];
}

/** The refs of a team whose writers diverge (format.md, "Teams"), the repository's value first. */
function divergences(team: TeamRead, ownerDid: string, ownerLabel: string): Diverged[] {
  const names = new Map<string, string>([
    [ownerDid, ownerLabel],
    ...team.members.map((m) => [m.did, m.name] as const),
  ]);
  const out: Diverged[] = [];
  for (const [ref, value] of team.refs) {
    if (value.divergent === undefined) continue;
    const by = (did: string) => names.get(did) ?? did;
    out.push({
      ref,
      values: [
        { target: value.target ?? null, by: by(value.by), did: value.by },
        ...value.divergent.map((d) => ({
          target: d.target ?? null,
          by: by(d.did),
          did: d.did,
          ...(d.target === undefined ? {} : { listedAs: divergentName(by(d.did), ref) }),
        })),
      ],
    });
  }
  return out;
}
