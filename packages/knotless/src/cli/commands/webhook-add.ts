import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, stringOption, type Command } from '../command.ts';
import { KnotlessError } from 'knotless-core/errors';
import { WEBHOOK_DETAILS, webhooksOf } from './webhook-shared.ts';

export const command: Command = {
  name: 'webhook add',
  args: '<repo>',
  summary: "have the appview post a repository's events (pushes, pull requests, issues) to a URL",
  details: [
    WEBHOOK_DETAILS,
    'Every event is posted, signed with the secret (X-Knotless-Signature-256: HMAC-SHA256 of the body). The secret is printed this once, on stdout: keep it where your receiver can check signatures with it.',
  ],
  options: {
    url: { type: 'string', value: 'URL', help: "the receiver's address, https (required)" },
    secret: {
      type: 'string',
      value: 'S',
      help: 'the secret that signs deliveries (default: one made for you)',
    },
    json: JSON_OPTION,
  },
  examples: ['knotless webhook add site --url https://ci.example/hooks/knotless'],
  positionals: { min: 1, max: 1 },
  async run({ ctx, io, args }) {
    const url = stringOption(args, 'url');
    if (url === undefined) throw new KnotlessError('usage', "Give the receiver's address with --url.");
    const hooks = await webhooksOf(ctx(), args.positionals[0]!);
    const h = await hooks.add(url, stringOption(args, 'secret'));
    if (args.values['json'] === true) return void io.out(safeJson(h));
    io.err(
      `Added webhook ${safeText(h.id)} to ${safeText(hooks.repo)}, posting to ${safeText(h.url)}; its secret (shown only now):`,
    );
    io.out(safeText(h.secret, 300));
  },
};
