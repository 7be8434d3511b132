import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, type Command } from '../command.ts';
import { WEBHOOK_DETAILS, webhooksOf } from './webhook-shared.ts';

export const command: Command = {
  name: 'webhook list',
  args: '<repo>',
  summary: "list a repository's webhooks and how each one's last delivery went",
  details: [
    WEBHOOK_DETAILS,
    "Each line: id, URL, when added (UTC), and the last delivery's event, state and HTTP status. Secrets are never listed.",
  ],
  options: { json: JSON_OPTION },
  positionals: { min: 1, max: 1 },
  async run({ ctx, io, args }) {
    const hooks = await webhooksOf(ctx(), args.positionals[0]!);
    const list = await hooks.list();
    if (args.values['json'] === true) return void io.out(safeJson(list));
    if (list.length === 0) io.err(`${safeText(hooks.repo)} has no webhooks.`);
    for (const h of list) {
      const last = h.lastDelivery;
      const tail =
        last === undefined
          ? 'no delivery yet'
          : `last: ${safeText(last.event, 40)} ${safeText(last.state, 40)}${last.status === null ? '' : ` (HTTP ${last.status})`}`;
      io.out(`${safeText(h.id, 80)}  ${safeText(h.url, 300)}  ${safeText(h.createdAt, 40)}  ${tail}`);
    }
  },
};
