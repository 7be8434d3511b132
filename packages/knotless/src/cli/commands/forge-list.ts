import { KnotlessError } from 'knotless-core/errors';
import type { Kind } from '../../forge/kinds.ts';
import { listItems } from '../../forge/subjects.ts';
import { shortIds } from 'knotless-core/forge/short-id';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, stringOption, type Command } from '../command.ts';
import { currentDid, forgeReader, itemJson, itemLine, targetOf } from '../forge-shared.ts';

type Base = { repo: string; title: string; createdAt: string };

/**
 * What an empty listing says: where it came from, and, from an appview, that it can be behind (it
 * learns of records from the network's event stream, seconds after they are written), so that "none"
 * is not read as the accounts' last word. Without an appview the reader's note has said whose
 * accounts were read.
 */
function noneListed(
  label: string,
  state: string,
  noun: string,
  appview: string | undefined,
  me: string | undefined,
): string {
  const what = `${state === 'all' ? '' : `${state} `}${noun}s`;
  if (appview === undefined) return `${label} has no ${what}.`;
  const own = me === undefined ? '' : " (new ones of yours and of the owner's are read from their accounts)";
  return `${label} has no ${what} that the appview at ${safeText(appview)} lists; it learns of new ones a few seconds after they are written${own}.`;
}

/** `pr list` / `issue list`: newest first, open ones unless --state says otherwise. */
export function listCommand<R extends Base>(kind: Kind<R>): Command {
  const states = [...kind.states, 'all'];
  return {
    name: `${kind.word} list`,
    args: '<[handle/]repo>',
    summary: `list a repository's ${kind.noun}s (open ones unless --state says otherwise)`,
    details: [
      `Anyone's ${kind.noun}s are found through the appview (KNOTLESS_APPVIEW, which \`knotless dev\` sets); without one, only those in the owner's account and yours.`,
      'Each line: short id, id, state, title, author, when opened (UTC). Either id is accepted by every other command.',
    ],
    options: {
      state: { type: 'string', value: states.join('|'), help: 'which to list (default: open)' },
      json: JSON_OPTION,
    },
    positionals: { min: 1, max: 1 },
    async run({ ctx, io, args }) {
      const state = stringOption(args, 'state') ?? 'open';
      if (!states.includes(state))
        throw new KnotlessError('usage', `--state must be one of ${states.join(', ')}.`);
      const c = ctx();
      const target = await targetOf(c, args.positionals[0]!);
      // Every item, whatever --state shows: short ids are unique among all of the repository's.
      const me = await currentDid(c);
      const all = await listItems(forgeReader(c, io), kind, target.owner, target.uri, 'all', me);
      const items = state === 'all' ? all : all.filter((it) => it.state === state);
      const shorts = shortIds(all.map((it) => it.rkey));
      const short = (rkey: string): string => shorts.get(rkey) ?? rkey;
      if (args.values['json'] === true) {
        io.out(safeJson(items.map((it) => ({ ...itemJson(it), short: short(it.rkey) }))));
        return;
      }
      if (items.length === 0) io.err(noneListed(target.label, state, kind.noun, c.config.appview, me));
      for (const it of items) io.out(itemLine(it, short(it.rkey)));
    },
  };
}
