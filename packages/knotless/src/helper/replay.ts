import { KnotlessError } from 'knotless-core/errors';
import { writeAllSync } from 'knotless-core/text/fd-io';
import { CommandReader, type HelperIo } from './protocol.ts';

/**
 * What a thin helper hands over when the warm agent went away in the middle of a session before any
 * push was sent to it: everything git wrote so far and will write (`source`, from the start), and
 * what git has already been answered (`delivered`).
 */
export interface Replay {
  source: () => Promise<Uint8Array | undefined>;
  delivered: string;
}

/**
 * The helper's io for going on directly: git's commands are run again from the start, and the answers
 * git already has are not written again. git decided on those answers, so each must come out the same
 * (a listing the agent gave must still be true); one that does not stops the command, with nothing
 * written.
 */
export function replayIo(replay: Replay): HelperIo {
  let owed = replay.delivered;
  return {
    reader: new CommandReader(replay.source),
    env: process.env,
    hosted: false,
    answer: (lines) => {
      let text = lines.map((l) => `${l}\n`).join('');
      if (owed !== '') {
        const same = Math.min(owed.length, text.length);
        if (owed.slice(0, same) !== text.slice(0, same))
          throw new KnotlessError(
            'remote-changed',
            'the warm agent stopped during this command and the remote changed meanwhile, so git decided on refs that are no longer there; nothing was written: run the command again.',
          );
        owed = owed.slice(same);
        text = text.slice(same);
      }
      if (text !== '') writeAllSync(1, text);
    },
  };
}
