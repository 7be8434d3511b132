import { BlobCache } from 'knotless-core/cache/blob-cache';
import { KnotlessError, isKnotlessError } from 'knotless-core/errors';
import { addMaintainer, isMember, removeMaintainer } from 'knotless-core/ops/team';
import { movedSentence } from 'knotless-core/ops/table-migrate';
import { readOwnerTable } from 'knotless-core/records/maintainers';
import { parseRepoSpec } from 'knotless-core/records/name';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import type { Context } from '../../context.ts';
import { REPO_COLLECTION } from 'knotless-core/records/collections';
import { holdDecisions } from '../../forge/hold.ts';
import { forgeReader } from '../forge-shared.ts';
import { JSON_OPTION, type Command } from '../command.ts';
import { ownRepo, ownerOf } from './owner.ts';
import { share } from 'knotless-core/private/members';
import { membersEnv } from './private-env.ts';

const VERBS = ['add', 'remove', 'list'];

export const command: Command = {
  name: 'repo maintainer',
  args: 'add|remove|list <[handle/]repo> [<handle>]',
  summary: 'list, add or remove the maintainers who may push to a repository',
  details: [
    "Maintainers push to the repository with its own URL (git push knotless://owner/repo), each writing only their own account; every reader computes the repository's refs from the owner's ref table and theirs. The list is a field of the owner's ref table: add and remove are one write of it, by the owner only, and take effect for every reader at once.",
    'A maintainer of a private repository is one of its members: add shares it with them first (as `knotless repo share` does) when they are not, and they seal what they push with its key.',
    "Removing a maintainer keeps what the repository held: the owner's table takes every ref's value as it was computed just before (a value only the maintainer held is copied into the owner's account, packs and all), and anything they write afterwards counts for nothing.",
  ],
  options: { json: JSON_OPTION },
  examples: [
    'knotless repo maintainer add project bob.example',
    'knotless repo maintainer list alice.example/project',
    'knotless repo maintainer remove project bob.example',
  ],
  positionals: { min: 2, max: 3 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const [verb, specText, who] = args.positionals as [string, string, string | undefined];
    const json = args.values['json'] === true;
    if (!VERBS.includes(verb))
      throw new KnotlessError(
        'usage',
        `knotless repo maintainer takes add, remove or list, not ${safeText(verb)}; run \`knotless repo maintainer --help\` for its usage.`,
      );
    if (verb === 'list') {
      if (who !== undefined)
        throw new KnotlessError(
          'usage',
          'knotless repo maintainer list takes the repository alone; run `knotless repo maintainer --help` for its usage.',
        );
      const spec = parseRepoSpec(specText);
      const owner = await ownerOf(c, spec.owner);
      const remote = c.remoteRepo(owner, spec.name, (m) => io.err(`knotless: warning: ${m}`));
      // A repository on ref records has no maintainers: nothing to list, which is no failure.
      const listed = (await readOwnerTable(remote))?.maintainers ?? [];
      const named = await Promise.all(
        listed.map(async (m) => ({ ...m, handle: await handleOf(c, m.did, io) })),
      );
      if (json) {
        io.out(
          safeJson({
            repo: remote.label,
            owner: { did: owner.did, handle: owner.handle ?? null },
            maintainers: named.map((m) => ({ did: m.did, handle: m.handle ?? null, since: m.since })),
          }),
        );
        return;
      }
      if (named.length === 0) io.err(`${remote.label} has no maintainers; only its owner pushes to it.`);
      // Columns as the other lists print them: spaces, since a terminal's tab is escaped as any control is.
      const names = named.map((m) => safeText(m.handle ?? m.did));
      const width = Math.max(0, ...names.map((n) => n.length));
      named.forEach((m, i) =>
        io.out(`${names[i]!.padEnd(width)}  ${safeText(m.did)}  since ${safeText(m.since, 40)}`),
      );
      return;
    }
    if (who === undefined)
      throw new KnotlessError(
        'usage',
        `Name the account to ${verb === 'add' ? 'add' : 'remove'} (knotless repo maintainer ${verb} ${safeText(specText)} <handle>).`,
      );
    const { auth, remote } = await ownRepo(c, specText, 'change the maintainers of', io);
    if (verb === 'add') {
      const maintainer = await c.resolver.resolve(who);
      const name = safeText(maintainer.handle ?? maintainer.did);
      // A maintainer of a private repository seals what they push with its key: they are made a
      // member first (as `repo share` does), unless they are one.
      await remote.prepare();
      if (remote.isPrivate) {
        if (!(await isMember(remote, maintainer.did))) {
          const keys = await share(membersEnv(c, auth), remote.name, maintainer);
          io.err(
            `Shared ${remote.label} with ${name} (${safeText(maintainer.did)}), ${keys.length === 1 ? '1 key' : `${keys.length} keys`}, as a maintainer of a private repository reads it:`,
          );
          for (const k of keys) io.err(`  ${k.fingerprint}  ${safeText(k.label, 64)}`);
        }
      }
      const added = await addMaintainer(remote, auth, maintainer.did, (moved) => {
        const said = movedSentence(remote.label, moved);
        if (said !== undefined) io.err(said);
      });
      if (json)
        io.out(
          safeJson({
            repo: remote.label,
            maintainer: { did: maintainer.did, handle: maintainer.handle ?? null },
            added,
          }),
        );
      else
        io.err(
          added
            ? `${remote.label}: ${name} is a maintainer now, and may push to it (git push knotless://${remote.label} …).`
            : `${remote.label}: ${name} is a maintainer already.`,
        );
      return;
    }
    // A maintainer whose DID no longer resolves can still be removed by their DID.
    const did = who.startsWith('did:') ? who : (await c.resolver.resolve(who)).did;
    const name = safeText(who);
    // Their decisions that are the team's latest are the owner's first, so that no state moves.
    const held = await holdDecisions(
      forgeReader(c, io),
      auth,
      remote.owner,
      `at://${remote.owner.did}/${REPO_COLLECTION}/${remote.name}`,
      remote.label,
      did,
    );
    const done = await removeMaintainer(remote, auth, did, new BlobCache(c.config.cacheDir));
    if (done.removed && done.unread !== undefined)
      io.err(
        `knotless: warning: the refs ${name} pushed to ${remote.label} could not be read (${done.unread}); values only they held are not kept`,
      );
    if (json)
      io.out(
        safeJson({
          repo: remote.label,
          maintainer: { did },
          removed: done.removed,
          kept: done.kept,
          decisions: held,
        }),
      );
    else if (!done.removed)
      io.err(`${remote.label}: ${name} is not one of its maintainers; nothing changed.`);
    else
      io.err(
        `${remote.label}: ${name} is no longer a maintainer${done.kept.length === 0 ? '' : `; the repository keeps their ${done.kept.map((r) => safeText(r)).join(', ')}`}.`,
      );
  },
};

/** A maintainer's handle, or undefined (shown as the DID) when it does not resolve: one warning says so. */
async function handleOf(
  c: Context,
  did: string,
  io: { err: (line: string) => void },
): Promise<string | undefined> {
  try {
    return (await c.resolver.resolve(did)).handle;
  } catch (err) {
    if (!isKnotlessError(err)) throw err;
    io.err(
      `knotless: warning: maintainer ${safeText(did)} could not be resolved (${err.message.replace(/\.$/, '')})`,
    );
    return undefined;
  }
}
