import { share } from 'knotless-core/private/members';
import { safeText } from 'knotless-core/text/terminal';
import type { Command } from '../command.ts';
import { ownRepo } from './owner.ts';
import { membersEnv } from './private-env.ts';

export const command: Command = {
  name: 'repo share',
  args: '<name> <handle>',
  summary: 'let an account read a private repository (its key is wrapped to their devices)',
  details: [
    "The handle is resolved both ways (handle to DID, and the DID's document naming the handle); the fingerprints of the keys the repository is shared with are printed: compare them with what `knotless key list` shows on their machine.",
  ],
  positionals: { min: 2, max: 2 },
  examples: ['knotless repo share secret bob.bsky.social'],
  async run({ ctx, io, args }) {
    const c = ctx();
    const { auth, remote } = await ownRepo(c, args.positionals[0]!, 'share', io);
    const member = await c.resolver.resolve(args.positionals[1]!);
    const keys = await share(membersEnv(c, auth), remote.name, member);
    const who = `${safeText(member.handle ?? member.did)} (${safeText(member.did)})`;
    io.err(`Shared ${remote.label} with ${who}, ${keys.length === 1 ? '1 key' : `${keys.length} keys`}:`);
    for (const k of keys) io.err(`  ${k.fingerprint}  ${safeText(k.label, 64)}`);
  },
};
