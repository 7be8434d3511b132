// A decision on a pull request or issue (close, reopen, merged, labels) written as a state record in
// the deciding account: the one write both front ends make (the CLI's commands, the appview's
// buttons), which differ only in how they read what to decide and how they show the result. The
// record is written only when the authority rule lets it count (state-write.ts).
import { KnotlessError } from '../errors.ts';
import { inTeam, teamDecision, type Decision, type Team } from '../records/forge-authority.ts';
import { safeText } from '../text/terminal.ts';
import { ISSUE_STATE, PULL_STATUS, checkToWrite, writeRecord } from './records.ts';
import {
  checkOutcome,
  checkStateWrite,
  decisionKey,
  deciders,
  stateBy,
  stateRecord,
  writeTeam,
  type StateWrite,
} from './state-write.ts';
import type { ForgeStore } from './store.ts';
import { newTid } from '../tid.ts';

/** The lexicons' limits on labels (a string's maxLength counts UTF-8 bytes). */
export const MAX_LABELS = 20;
export const MAX_LABEL = 64;

/** Throws `usage` for a label the lexicon would refuse: empty, or over MAX_LABEL bytes of UTF-8. */
export function checkLabel(label: string): void {
  if (label.trim() === '' || Buffer.byteLength(label) > MAX_LABEL)
    throw new KnotlessError(
      'usage',
      `A label is 1 to ${MAX_LABEL} bytes of UTF-8; "${safeText(label, 80)}" is not.`,
    );
}

/** Throws `usage` when an item would carry more labels than the lexicon allows. */
export function checkLabelCount(labels: string[], noun: string): void {
  if (labels.length > MAX_LABELS)
    throw new KnotlessError('usage', `A ${noun} has at most ${MAX_LABELS} labels.`);
}

/**
 * A label list as text, the way both front ends write it (the CLI's views and answers, the web's
 * labels form): in order, comma-separated. A label may itself hold a comma (the CLI's `--add` takes
 * any), so one that holds a comma or a double quote, or starts or ends with a space, is written in
 * double quotes with its quotes doubled, as in CSV: the list reads back as the same labels. `each`
 * makes one label safe where it goes (the terminal's escaping); `parseLabelList` reads it back.
 */
export function labelList(labels: readonly string[], each: (label: string) => string = (l) => l): string {
  return labels.map((l) => quoteLabel(each(l))).join(', ');
}

function quoteLabel(label: string): string {
  return /[,"]/.test(label) || label.trim() !== label ? `"${label.replaceAll('"', '""')}"` : label;
}

/**
 * The labels a list as `labelList` writes it names (the web's form): comma-separated, a label in
 * double quotes kept whole with its commas (`""` is a quote in it), the others trimmed; empty ones
 * dropped, each once, in order. Throws `usage` for a quote left open or text after a closing quote.
 */
export function parseLabelList(text: string): string[] {
  const labels: string[] = [];
  let i = 0;
  while (i <= text.length) {
    while (text[i] === ' ' || text[i] === '\t') i++;
    let label: string;
    if (text[i] === '"') {
      label = '';
      for (i++; ; i++) {
        if (i >= text.length)
          throw new KnotlessError(
            'usage',
            'A quoted label needs its closing double quote: write a label with a comma as "a, b".',
          );
        if (text[i] === '"') {
          if (text[i + 1] !== '"') break;
          i++;
        }
        label += text[i];
      }
      for (i++; text[i] === ' ' || text[i] === '\t'; i++);
      if (i < text.length && text[i] !== ',')
        throw new KnotlessError(
          'usage',
          'A quoted label ends at its closing double quote; put a comma after it before the next label.',
        );
    } else {
      const comma = text.indexOf(',', i);
      const stop = comma === -1 ? text.length : comma;
      label = text.slice(i, stop).trim();
      i = stop;
    }
    if (label.trim() !== '') labels.push(label);
    i++;
  }
  return [...new Set(labels)];
}

/**
 * Throws `permission-denied` unless `w.me` is the repository's owner or one of its maintainers:
 * labels count only from them.
 */
export function checkLabelWrite(
  w: Pick<StateWrite, 'me' | 'myName' | 'owner' | 'maintainers' | 'label' | 'noun'>,
): void {
  if (!inTeam(writeTeam(w), w.me))
    throw new KnotlessError(
      'permission-denied',
      `Only ${deciders(w)} can label its ${w.noun}s; you are ${safeText(w.myName)}.`,
    );
}

/**
 * Whether a close or reopen would change nothing: the item is already in `state`, by `me`'s side
 * of the rule too (the team's latest decision for its owner or a maintainer, else `me`'s own): the
 * team may still close what its author withdrew, which the author could otherwise reopen.
 */
export function alreadyDecided(
  current: string,
  decisions: Decision<string>[],
  me: string,
  state: string,
  team: Team,
): boolean {
  return current === state && stateBy(decisions, me, team) === state;
}

/** What a label change writes: the team's state kept as it was (a label is no close or reopen). */
export function labelDecision(
  decisions: Decision<string>[],
  team: Team,
  labels: string[],
  merged: string | undefined,
): { state: string; extra: Record<string, unknown> } {
  const own = stateBy(decisions, team.owner, team);
  // A merge that overrode the protection stays visible through a later label change.
  const ignoredChecks = teamDecision(
    decisions.filter((d) => d.state === 'merged'),
    team,
  )?.ignoredChecks;
  return {
    state: own,
    extra: {
      labels,
      ...(own === 'merged' && merged !== undefined ? { merged } : {}),
      ...(own === 'merged' && ignoredChecks !== undefined ? { ignoredChecks } : {}),
    },
  };
}

export interface DecisionWrite extends StateWrite {
  /** The pull request's or issue's at-uri. */
  subject: string;
  /** The labels the item has, which the team's record keeps. */
  labels: string[];
  /** Fields beyond the state: `merged`, or the labels of a label change. */
  extra?: Record<string, unknown>;
  /** The item's decisions so far, when the writer has them: the record is decided again among them. */
  decisions?: Decision<string>[];
  /** How the item's author is named when the rule says they decided. */
  authorName: string;
  /** The state the item must be in after the write (the state written, unless only labels change). */
  expect?: string;
}

/**
 * Writes a state record for `d.subject` in `auth`'s account, after checking the authority rule
 * (format.md): the owner and the maintainers may set any state, the author only close or reopen their
 * own. A record the rule would ignore or outrank is never written, nor one its readers would skip
 * (`read` is the record's reader, forge/read.ts).
 */
export async function writeDecision(
  store: ForgeStore,
  auth: Parameters<ForgeStore['create']>[0],
  read: (value: unknown) => Promise<unknown>,
  d: DecisionWrite,
): Promise<{ uri: string; cid: string; rkey: string }> {
  checkStateWrite(d);
  const word = d.noun === 'pull request' ? 'pr' : 'issue';
  const collection = word === 'pr' ? PULL_STATUS : ISSUE_STATE;
  const team = writeTeam(d);
  const keep = inTeam(team, d.me) ? d.labels : [];
  const record = writeRecord(collection, stateRecord(word, d.subject, d.state, keep, d.extra));
  await checkToWrite(read, record, `${d.noun}'s state`);
  const rkey = decisionKey(newTid(), d.decisions ?? [], team, d.me);
  // Decided again with this record among the others: one the rule would outrank is never written.
  if (d.decisions !== undefined)
    checkOutcome({
      ...d,
      decisions: d.decisions,
      rkey,
      ...(d.expect === undefined ? {} : { expect: d.expect }),
    });
  return store.create(auth, collection, record, rkey);
}
