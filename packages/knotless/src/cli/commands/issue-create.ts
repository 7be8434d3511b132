import { activeSession } from '../../auth/login.ts';
import { KnotlessError } from 'knotless-core/errors';
import { ISSUE, checkToWrite, parseIssue, writeRecord } from '../../forge/records.ts';
import { safeJson } from 'knotless-core/text/terminal';
import { JSON_OPTION, stringOption, type Command } from '../command.ts';
import { createdItem, forgeReader, itemJson, targetOf } from '../forge-shared.ts';

export const command: Command = {
  name: 'issue create',
  args: '<[handle/]repo>',
  summary: 'open an issue about a repository (the issue is a record in your account)',
  options: {
    title: { type: 'string', short: 't', value: 'T', help: 'the title (required)' },
    body: { type: 'string', short: 'b', value: 'B', help: 'the description' },
    json: JSON_OPTION,
  },
  examples: ['knotless issue create alice.test/site --title "The build fails" --body "…"'],
  positionals: { min: 1, max: 1 },
  async run({ ctx, io, args }) {
    const title = stringOption(args, 'title');
    if (title === undefined || title.trim() === '')
      throw new KnotlessError('usage', 'Give the issue a --title.');
    const c = ctx();
    const target = await targetOf(c, args.positionals[0]!);
    const auth = await activeSession(c);
    const body = stringOption(args, 'body');
    const record = {
      repo: target.uri,
      title,
      ...(body === undefined || body === '' ? {} : { body }),
      createdAt: new Date().toISOString(),
    };
    // Checked as any reader will check it: an issue too long for the lexicon is refused here.
    await checkToWrite(parseIssue, record, 'issue');
    const made = await forgeReader(c, io).store.create(auth, ISSUE, writeRecord(ISSUE, record));
    const item = createdItem(auth.session, made, record);
    const id = item.id;
    if (args.values['json'] === true) io.out(safeJson(itemJson(item)));
    else io.out(id);
    io.err(`Opened issue ${id} on ${target.label}.`);
  },
};
