import { safeText } from 'knotless-core/text/terminal';
import type { Command } from '../command.ts';
import { WEBHOOK_DETAILS, webhooksOf } from './webhook-shared.ts';

export const command: Command = {
  name: 'webhook remove',
  args: '<repo> <id>',
  summary: 'remove a webhook: nothing more is posted to it',
  details: [WEBHOOK_DETAILS, 'The id is the one `knotless webhook list` shows.'],
  positionals: { min: 2, max: 2 },
  async run({ ctx, io, args }) {
    const hooks = await webhooksOf(ctx(), args.positionals[0]!);
    const id = args.positionals[1]!;
    await hooks.remove(id);
    io.err(`Removed webhook ${safeText(id, 80)} from ${safeText(hooks.repo)}.`);
  },
};
