import { KnotlessError } from 'knotless-core/errors';
import { parseRepoSpec } from 'knotless-core/records/name';
import { verifyRepo } from 'knotless-core/records/verify-refs';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, type Command } from '../command.ts';
import { ownerOf } from './owner.ts';

export const command: Command = {
  name: 'verify',
  args: '<[handle/]name>',
  summary: "check a repository's refs against its owner's signed commit",
  details: [
    "Shows the account (DID, handle), its PDS, the signing key of its DID document, the signed commit the refs were proved at, and each ref's verdict. Every repository is proved whole: a ref table is one signed record; a repository still on ref records has its listing checked against the signed commit's tree, walked over every key under its name (each record at its listed CID, none left out); when that does not hold, each record listed is checked against its own proof.",
    'Exits 21 when any ref, the table, or that the listing is complete could not be verified. KNOTLESS_VERIFY=0 does not apply: this command always checks.',
  ],
  options: { json: JSON_OPTION },
  positionals: { min: 1, max: 1 },
  examples: ['knotless verify alice.bsky.social/project', 'knotless verify project --json'],
  async run({ ctx, io, args }) {
    const c = ctx();
    const spec = parseRepoSpec(args.positionals[0]!);
    const owner = await ownerOf(c, spec.owner);
    const remote = c.remoteRepo(owner, spec.name, (m) => io.err(`knotless: warning: ${m}`));
    const v = await verifyRepo(remote);
    const repo = `${owner.handle ?? owner.did}/${spec.name}`;
    if (args.values['json'] === true) {
      io.out(safeJson({ repo, ...v }));
    } else {
      // Everything but the verdicts' words came from the network: escaped where it is printed.
      io.out(safeText(repo));
      io.out(`  account   ${safeText(v.did)}${v.handle === undefined ? '' : ` (${safeText(v.handle)})`}`);
      io.out(`  pds       ${safeText(v.pds)}`);
      io.out(`  key       ${safeText(v.key)}`);
      io.out(
        v.layout === 'table'
          ? '  layout    ref table (the listing is proved complete)'
          : v.complete
            ? '  layout    ref records (each ref is proved, and the listing is proved complete)'
            : '  layout    ref records (the listing is NOT proved complete; each ref listed is checked on its own)',
      );
      if (v.rev !== undefined)
        io.out(`  commit    ${safeText(v.commit ?? '')} (rev ${safeText(v.rev)}), checked ${v.checkedAt}`);
      io.out(`  refs      ${v.refs.length}`);
      for (const r of v.refs) {
        const to = r.symref !== undefined ? `-> ${safeText(r.symref)}` : safeText(r.target ?? '');
        const verdict = r.verified ? 'verified    ' : 'not verified';
        io.out(
          `    ${verdict}  ${safeText(r.ref)}  ${to}${r.why === undefined ? '' : `  (${safeText(r.why)})`}`,
        );
      }
    }
    const failed = v.refs.filter((r) => !r.verified).length;
    if (failed === 0 && !v.complete)
      throw new KnotlessError(
        'unverified-remote',
        `The listing of ${safeText(repo)} could not be proved complete (${safeText(v.incomplete ?? 'no reason given')}): its PDS may be hiding a ref; check the PDS or the network in between and try again.`,
      );
    if (failed > 0)
      throw new KnotlessError(
        'unverified-remote',
        `${failed} of the ${v.refs.length} refs of ${safeText(repo)} could not be verified against the account's signed commit (listed above); do not fetch them until its PDS serves proofs that hold, and check the PDS or the network in between.`,
      );
  },
};
