import { resealRefs } from 'knotless-core/private/reseal';
import { unshare } from 'knotless-core/private/members';
import { safeText } from 'knotless-core/text/terminal';
import { KnotlessError } from 'knotless-core/errors';
import { readOwnerTable } from 'knotless-core/records/maintainers';
import type { Command } from '../command.ts';
import { ownRepo } from './owner.ts';
import { membersEnv } from './private-env.ts';

export const command: Command = {
  name: 'repo unshare',
  args: '<name> <handle>',
  summary: 'remove a member of a private repository and rotate its key',
  details: [
    'A new key is made and wrapped, with the earlier ones, to the members who remain; every ref record is sealed again under it. What is pushed from now on is unreadable to the removed member; what they could read before, they may have kept.',
  ],
  positionals: { min: 2, max: 2 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const { auth, remote } = await ownRepo(c, args.positionals[0]!, 'unshare', io);
    const member = await c.resolver.resolve(args.positionals[1]!);
    // A maintainer seals what they push with the key: they stop maintaining before they stop reading.
    const found = await readOwnerTable(remote);
    if (found !== undefined && found.maintainers.map((m) => m.did).includes(member.did))
      throw new KnotlessError(
        'usage',
        `${safeText(member.handle ?? member.did)} is a maintainer of ${remote.label}, and a maintainer reads what they push; remove them as one first (\`knotless repo maintainer remove ${remote.name} ${safeText(member.handle ?? member.did)}\`), then unshare. Nothing was changed.`,
      );
    const epoch = await unshare(membersEnv(c, auth), remote.name, member);
    // A fresh RemoteRepo: its sealer is made from the ring just rotated.
    const fresh = c.remoteRepo(remote.owner, remote.name, (m) => io.err(`knotless: warning: ${m}`));
    const n = await resealRefs(fresh, auth);
    io.err(
      `Removed ${safeText(member.handle ?? member.did)} from ${remote.label}; key epoch ${epoch}, ${n === 1 ? '1 ref' : `${n} refs`} sealed again.`,
    );
  },
};
