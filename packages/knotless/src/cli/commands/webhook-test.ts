import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, type Command } from '../command.ts';
import { WEBHOOK_DETAILS, webhooksOf } from './webhook-shared.ts';

export const command: Command = {
  name: 'webhook test',
  args: '<repo> <id>',
  summary: 'have the appview post a signed ping to a webhook',
  details: [
    WEBHOOK_DETAILS,
    'The ping is queued and posted in the background, as every delivery is: `knotless webhook list` shows how it went.',
  ],
  options: { json: JSON_OPTION },
  positionals: { min: 2, max: 2 },
  async run({ ctx, io, args }) {
    const hooks = await webhooksOf(ctx(), args.positionals[0]!);
    const id = args.positionals[1]!;
    const delivery = await hooks.test(id);
    if (args.values['json'] === true) return void io.out(safeJson({ delivery }));
    io.err(`Queued a ping to webhook ${safeText(id, 80)} of ${safeText(hooks.repo)}; its delivery id:`);
    io.out(safeText(delivery, 80));
  },
};
