import { activeSession } from '../../auth/login.ts';
import { listKeys } from 'knotless-core/private/key-records';
import { deviceKeyPublished } from 'knotless-core/private/members';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, type Command } from '../command.ts';
import { ownerOf } from './owner.ts';
import { membersEnv } from './private-env.ts';

export const command: Command = {
  name: 'key list',
  args: '[handle]',
  summary: "list an account's device keys (private repositories are encrypted to these)",
  details: [
    "Without a handle: your own, after making this machine's key if it has none (0600 in the config folder) and publishing its public half as a dev.knotless.key record. The machine's own key is marked with *.",
  ],
  options: { json: JSON_OPTION },
  positionals: { min: 0, max: 1 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const named = args.positionals[0];
    let mine: string | undefined;
    let owner;
    if (named === undefined) {
      const auth = await activeSession(c);
      const env = membersEnv(c, auth);
      mine = (await deviceKeyPublished(env)).recipient;
      owner = env.owner;
    } else owner = await ownerOf(c, named);
    const keys = await listKeys(c.client(owner.pds), owner.did);
    if (args.values['json'] === true) {
      io.out(safeJson(keys.map((k) => ({ ...k, thisMachine: k.recipient === mine }))));
      return;
    }
    if (keys.length === 0) io.err(`${safeText(owner.handle ?? owner.did)} has published no key.`);
    for (const k of keys)
      io.out(
        `${k.recipient === mine ? '*' : ' '} ${k.fingerprint}  ${safeText(k.label, 64)}  ${safeText(k.createdAt)}`,
      );
  },
};
