// The shapes the forge commands pass around (kept apart from subjects.ts, which reads them, so that
// fresh.ts can use them without importing subjects.ts back).
import type { Context } from '../context.ts';
import type { Decision, Team } from 'knotless-core/records/forge-authority';
import type { Identity } from 'knotless-core/identity/resolver';
import type { Appview } from './appview.ts';
import type { CommentRecord } from './records.ts';
import type { ForgeStore } from 'knotless-core/forge/store';
import { isKnotlessError } from 'knotless-core/errors';
import { safeText } from 'knotless-core/text/terminal';

/** A pull request or an issue with the state the authority rule gives it. */
export interface Item<R> {
  /** `<author-did>/<rkey>`: what the CLI prints and takes back. */
  id: string;
  uri: string;
  did: string;
  handle: string | undefined;
  rkey: string;
  cid: string;
  record: R;
  state: string;
  merged?: string;
  /** A merge that overrode the base branch's protection: the required checks it ignored, why. */
  ignoredChecks?: string[];
  labels: string[];
  /** The team's and the author's state records on it, when they were read from their PDSes. */
  decisions?: Decision<string>[];
}

export interface CommentItem {
  uri: string;
  did: string;
  handle: string | undefined;
  record: CommentRecord;
}

/** What the forge commands read through: the context, a record store, the appview when set. */
export interface Reader {
  ctx: Context;
  store: ForgeStore;
  appview: Appview | undefined;
  /** Said once on stderr (warnings, what a reading without appview leaves out). */
  note(message: string): void;
  /**
   * Who decides for `owner`'s repository `repo` (its at-uri): the owner and the maintainers its
   * verified ref table lists (knotless-core's records/maintainers.ts), read once per command.
   */
  team(owner: Identity, repo: string): Promise<Team>;
}

/** The maintainers each reader has said it could not read, so that each is said once. */
const unread = new WeakMap<Reader, Set<string>>();

/**
 * A maintainer's decisions that could not be read (a DID that resolves to nothing, a PDS down) are
 * left out, said once on stderr: the rest of the team and the author still decide, and one listed
 * account that cannot be read does not make the repository's pull requests and issues unreadable.
 * Anything but a KnotlessError is thrown on.
 */
export function leftOut(r: Reader, did: string, err: unknown): [] {
  if (!isKnotlessError(err)) throw err;
  const said = unread.get(r) ?? new Set<string>();
  unread.set(r, said);
  if (!said.has(did)) {
    said.add(did);
    r.note(
      `warning: the decisions of maintainer ${safeText(did)} could not be read (${err.message.replace(/\.$/, '')}); they are left out`,
    );
  }
  return [];
}
