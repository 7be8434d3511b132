import { activeSession } from '../../auth/login.ts';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { KnotlessError } from 'knotless-core/errors';
import { PULLS } from '../../forge/kinds.ts';
import { makeRound } from 'knotless-core/forge/packs';
import { PULL, parseAtUri, writeRecord } from '../../forge/records.ts';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, type Command } from '../command.ts';
import { itemFor, itemJson } from '../forge-shared.ts';

/** The most rounds a pull request may have (the lexicon's limit). */
const MAX_ROUNDS = 100;

export const command: Command = {
  name: 'pr update',
  args: '<[handle/]repo> <id>',
  summary: 'add a round to your pull request after pushing to its branch again',
  details: [
    "The new round pins the head branch's commit now and stores the commits it adds, against the base branch as it is now. Only the pull request's author can add rounds.",
  ],
  options: { json: JSON_OPTION },
  positionals: { min: 2, max: 2 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const { target, item, r } = await itemFor(c, io, PULLS, args);
    const auth = await activeSession(c);
    if (auth.session.did !== item.did)
      throw new KnotlessError(
        'permission-denied',
        `Only the author of ${safeText(item.id)} can add rounds to it; you are ${safeText(auth.session.handle)}.`,
      );
    if (item.state !== 'open')
      throw new KnotlessError(
        'usage',
        `${safeText(item.id)} is ${item.state}; reopen it before adding a round.`,
      );
    const pull = item.record;
    if (pull.rounds.length >= MAX_ROUNDS)
      throw new KnotlessError(
        'usage',
        `${safeText(item.id)} has ${MAX_ROUNDS} rounds, the most a pull request can have; open a new one.`,
      );
    const headUri = parseAtUri(pull.head.repo)!;
    const headOwner = await c.resolver.resolve(headUri.did);
    const warn = (m: string) => io.err(`knotless: warning: ${m}`);
    const round = await makeRound(
      c,
      auth,
      c.remoteRepo(target.owner, target.name, warn),
      pull.base,
      c.remoteRepo(headOwner, headUri.rkey, warn),
      pull.head.branch,
      new BlobCache(c.config.cacheDir),
    );
    const last = pull.rounds[pull.rounds.length - 1]!;
    if (round.head === last.head && round.base === last.base) {
      io.err(
        `${safeText(pull.head.branch)} and ${safeText(pull.base)} have not moved since round ${pull.rounds.length - 1}; nothing was written.`,
      );
    } else {
      const record = { ...pull, rounds: [...pull.rounds, round] };
      // Compare-and-swap on the record read: two updates at once cannot drop each other's round.
      await r.store.put(auth, PULL, item.rkey, writeRecord(PULL, record), item.cid);
      item.record = record;
      io.err(`Added round ${record.rounds.length - 1} (${round.head}) to ${safeText(item.id)}.`);
    }
    if (args.values['json'] === true)
      io.out(
        safeJson({
          ...itemJson(item),
          rounds: item.record.rounds.length,
          head: item.record.rounds.at(-1)!.head,
        }),
      );
    else io.out(item.id);
  },
};
