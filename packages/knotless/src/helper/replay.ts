import { writeAllSync } from 'knotless-core/text/fd-io';
import { CommandReader, type HelperIo } from './protocol.ts';

/**
 * What a thin helper hands over when the warm agent went away in the middle of a session: everything
 * git wrote so far and will write (`source`, from the start), and how many of the helper's answers git
 * already has (`answered`).
 */
export interface Replay {
  source: () => Promise<Uint8Array | undefined>;
  answered: number;
}

/**
 * The helper's io for going on directly: git's commands are run again from the start, and the first
 * `answered` answers are not written again, git has them. A listing may come out otherwise than the
 * agent's did (another machine pushed meanwhile, or the agent's own write landed before it died): git
 * decided on the agent's, and the push is then checked against the newer one (git's rules, the lease,
 * a ref already at its new commit is up to date), as a direct helper checks a push against a listing
 * that aged while git decided.
 */
export function replayIo(replay: Replay): HelperIo {
  let owed = replay.answered;
  return {
    reader: new CommandReader(replay.source),
    env: process.env,
    hosted: undefined,
    answer: (lines) => {
      if (owed > 0) owed--;
      else writeAllSync(1, lines.map((l) => `${l}\n`).join(''));
    },
    write: (bytes) => {
      if (owed > 0) owed--;
      else writeAllSync(1, bytes);
    },
  };
}
