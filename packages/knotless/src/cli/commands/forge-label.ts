import { activeSession } from '../../auth/login.ts';
import { KnotlessError } from 'knotless-core/errors';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import type { Kind } from '../../forge/kinds.ts';
import { JSON_OPTION, type Args, type Command } from '../command.ts';
import { itemFor, itemJson, stateOf, writeState } from './forge-shared.ts';

type Base = { repo: string; title: string; body?: string; createdAt: string };

/** The lexicons' limits on labels (a string's maxLength counts UTF-8 bytes). */
const MAX_LABELS = 20;
const MAX_LABEL = 64;

function list(args: Args, name: string): string[] {
  const v = args.values[name];
  return Array.isArray(v) ? v : typeof v === 'string' ? [v] : [];
}

/** `pr label` / `issue label`: the owner's labels, written as a decision that keeps the state. */
export function labelCommand<R extends Base>(kind: Kind<R>): Command {
  return {
    name: `${kind.word} label`,
    args: '<[handle/]repo> <id>',
    summary: `add or remove labels of a${kind.word === 'pr' ? ' pull request' : 'n issue'} (the repository's owner only)`,
    details: [
      `Labels count only from the repository's owner: they are written in a ${kind.stateCollection} record that keeps the current state.`,
    ],
    options: {
      add: { type: 'string', multiple: true, value: 'L', help: 'a label to add (repeatable)' },
      remove: { type: 'string', multiple: true, value: 'L', help: 'a label to remove (repeatable)' },
      json: JSON_OPTION,
    },
    positionals: { min: 2, max: 2 },
    async run({ ctx, io, args }) {
      const add = list(args, 'add');
      const remove = new Set(list(args, 'remove'));
      if (add.length === 0 && remove.size === 0)
        throw new KnotlessError('usage', 'Say what to change with --add or --remove.');
      for (const l of add)
        if (l.trim() === '' || Buffer.byteLength(l) > MAX_LABEL)
          throw new KnotlessError(
            'usage',
            `A label is 1 to ${MAX_LABEL} bytes of UTF-8; "${safeText(l, 80)}" is not.`,
          );
      const c = ctx();
      const { target, item, r } = await itemFor(c, io, kind, args);
      const auth = await activeSession(c);
      if (auth.session.did !== target.owner.did)
        throw new KnotlessError(
          'permission-denied',
          `Only ${target.label}'s owner can label its ${kind.noun}s; you are ${safeText(auth.session.handle)}.`,
        );
      const labels = [...new Set([...item.labels, ...add])].filter((l) => !remove.has(l));
      if (labels.length > MAX_LABELS)
        throw new KnotlessError('usage', `A ${kind.noun} has at most ${MAX_LABELS} labels.`);
      item.labels = labels;
      // The owner's own decision is kept as it was: a label is not a close or reopen of theirs.
      const own = stateOf(item, target.owner.did);
      await writeState(
        r,
        auth,
        kind,
        target,
        item,
        own,
        { labels, ...(own === 'merged' && item.merged !== undefined ? { merged: item.merged } : {}) },
        item.state,
      );
      io.err(
        `${safeText(item.id)}: ${labels.length === 0 ? 'no labels' : labels.map((l) => safeText(l, MAX_LABEL)).join(', ')}.`,
      );
      if (args.values['json'] === true) io.out(safeJson(itemJson(item)));
      else io.out(item.id);
    },
  };
}
