import { activeSession } from '../../auth/login.ts';
import { KnotlessError } from 'knotless-core/errors';
import { checkLabel, checkLabelCount, checkLabelWrite, labelDecision } from 'knotless-core/forge/decision';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import type { Kind } from '../../forge/kinds.ts';
import { JSON_OPTION, type Args, type Command } from '../command.ts';
import { itemFor, itemJson, labelsText, writeState } from '../forge-shared.ts';

type Base = { repo: string; title: string; body?: string; createdAt: string };

function list(args: Args, name: string): string[] {
  const v = args.values[name];
  return Array.isArray(v) ? v : typeof v === 'string' ? [v] : [];
}

/** `pr label` / `issue label`: the owner's labels, written as a decision that keeps the state. */
export function labelCommand<R extends Base>(kind: Kind<R>): Command {
  return {
    name: `${kind.word} label`,
    args: '<[handle/]repo> <id>',
    summary: `add or remove labels of a${kind.word === 'pr' ? ' pull request' : 'n issue'} (the repository's owner or maintainers only)`,
    details: [
      `Labels count only from the repository's owner and the maintainers its ref table lists: they are written in a ${kind.stateCollection} record that keeps the current state.`,
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
      for (const l of add) checkLabel(l);
      const c = ctx();
      const { target, item, r } = await itemFor(c, io, kind, args);
      const auth = await activeSession(c);
      const team = await r.team(target.owner, target.uri);
      checkLabelWrite({
        me: auth.session.did,
        myName: auth.session.handle,
        owner: target.owner.did,
        maintainers: team.maintainers,
        label: target.label,
        noun: kind.noun,
      });
      const labels = [...new Set([...item.labels, ...add])].filter((l) => !remove.has(l));
      checkLabelCount(labels, kind.noun);
      item.labels = labels;
      const d = labelDecision(item.decisions ?? [], team, labels, item.merged);
      await writeState(r, auth, kind, target, item, d.state, d.extra, item.state);
      io.err(`${safeText(item.id)}: ${labelsText(labels)}.`);
      if (args.values['json'] === true) io.out(safeJson(itemJson(item)));
      else io.out(item.id);
    },
  };
}
