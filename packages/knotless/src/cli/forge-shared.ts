import { activeSession } from '../auth/login.ts';
import type { SessionAuthorizer } from '../auth/store.ts';
import type { Context } from '../context.ts';
import { KnotlessError } from 'knotless-core/errors';
import type { Kind } from '../forge/kinds.ts';
import { writeComment } from 'knotless-core/forge/comment';
import { utcTime } from 'knotless-core/forge/short-id';
import { parseComment, repoUri } from '../forge/records.ts';
import { findItem, reader, type CommentItem, type Item, type Reader } from '../forge/subjects.ts';
import {
  MAX_LABEL,
  alreadyDecided,
  labelList,
  writeDecision,
  type DecisionWrite,
} from 'knotless-core/forge/decision';
import type { Identity } from 'knotless-core/identity/resolver';
import { parseRepoSpec } from 'knotless-core/records/name';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, stringOption, type Args, type Command } from './command.ts';
import type { Io } from './io.ts';
import { ownerOf } from './commands/owner.ts';

type Base = { repo: string; title: string; body?: string; createdAt: string };

/** The repository a forge command is about, `[handle/]name` (yours without a handle). */
export interface Target {
  owner: Identity;
  name: string;
  /** Its record's at-uri: what pull requests and issues name. */
  uri: string;
  label: string;
}

export async function targetOf(ctx: Context, spec: string): Promise<Target> {
  const s = parseRepoSpec(spec);
  const owner = await ownerOf(ctx, s.owner);
  // The repository must exist: a pull request or issue into nothing helps nobody.
  const record = await ctx.repoRecords().get(owner, s.name);
  const label = `${safeText(owner.handle ?? owner.did)}/${safeText(s.name)}`;
  if (record.private !== undefined) throw privateForge(label);
  return { owner, name: s.name, uri: repoUri(owner.did, s.name), label };
}

/**
 * Pull requests and issues live in their authors' accounts, in the clear, where anyone reads them:
 * on a private repository they would publish what it hides, so they are refused.
 */
export function privateForge(label: string): KnotlessError {
  return new KnotlessError(
    'usage',
    `${label} is private, and pull requests and issues are public records, so knotless keeps none for a private repository; discuss changes with its members elsewhere, or push a branch to it.`,
  );
}

/**
 * The current account's DID when there is one (KNOTLESS_IDENTIFIER, which may be a handle, or the
 * saved account); reading needs no login, so no session is made for it.
 */
export async function currentDid(ctx: Context): Promise<string | undefined> {
  const id = ctx.config.identifier ?? ctx.sessions.current();
  if (id === undefined) return undefined;
  return id.startsWith('did:') ? id : (await ctx.resolver.resolve(id)).did;
}

export function forgeReader(ctx: Context, io: Io): Reader {
  return reader(ctx, (m) => io.err(`knotless: ${m}`));
}

/** The fields `--json` prints for a pull request or an issue, at least id, state, title, author. */
/** The item a create just wrote, open and unlabelled, as the commands print it. */
export function createdItem<R>(
  session: { did: string; handle: string | undefined },
  made: { uri: string; cid: string; rkey: string },
  record: R,
): Item<R> {
  return {
    id: `${session.did}/${made.rkey}`,
    uri: made.uri,
    did: session.did,
    handle: session.handle,
    rkey: made.rkey,
    cid: made.cid,
    record,
    state: 'open',
    labels: [],
  };
}

export function itemJson(item: Item<Base>): Record<string, unknown> {
  return {
    id: item.id,
    uri: item.uri,
    state: item.state,
    title: item.record.title,
    author: item.handle ?? item.did,
    authorDid: item.did,
    repo: item.record.repo,
    ...(item.merged === undefined ? {} : { merged: item.merged }),
    ...(item.ignoredChecks === undefined ? {} : { ignoredChecks: item.ignoredChecks }),
    labels: item.labels,
    createdAt: item.record.createdAt,
  };
}

/** One line of a listing: short id, id, state, title, author, when it was opened (UTC). */
export function itemLine(item: Item<Base>, short: string): string {
  const at = utcTime(item.record.createdAt) ?? safeText(item.record.createdAt, 40);
  return `${safeText(short, 20).padEnd(4)}  ${safeText(item.id, 120)}  ${item.state.padEnd(6)}  ${safeText(item.record.title, 100)}  (${safeText(item.handle ?? item.did)})  ${at}`;
}

export function commentJson(c: CommentItem): Record<string, unknown> {
  return {
    uri: c.uri,
    author: c.handle ?? c.did,
    authorDid: c.did,
    ...(c.record.round === undefined ? {} : { round: c.record.round }),
    ...(c.record.path === undefined ? {} : { path: c.record.path, line: c.record.line }),
    body: c.record.body,
    createdAt: c.record.createdAt,
  };
}

export function printComments(io: Io, comments: CommentItem[]): void {
  io.out(`comments (${comments.length})`);
  for (const c of comments) {
    const at = c.record.path === undefined ? '' : ` at ${safeText(c.record.path)}:${c.record.line}`;
    const round = c.record.round === undefined ? '' : ` on round ${c.record.round}${at}`;
    const when = utcTime(c.record.createdAt) ?? safeText(c.record.createdAt, 40);
    io.out(`  ${safeText(c.handle ?? c.did)}${round}, ${when}:`);
    for (const line of c.record.body.split('\n')) io.out(`    ${safeText(line, 1000)}`);
  }
}

export function printBody(io: Io, body: string | undefined): void {
  if (body === undefined || body === '') return;
  io.out('');
  for (const line of body.split('\n')) io.out(`  ${safeText(line, 1000)}`);
  io.out('');
}

/** Finds the item a command names and the session to write with. */
export async function itemFor<R extends Base>(
  ctx: Context,
  io: Io,
  kind: Kind<R>,
  args: Args,
): Promise<{ target: Target; item: Item<R>; r: Reader }> {
  const target = await targetOf(ctx, args.positionals[0]!);
  const r = forgeReader(ctx, io);
  const item = await findItem(r, kind, target.owner, target.uri, args.positionals[1]!, await currentDid(ctx));
  return { target, item, r };
}

/** `<kind> comment`: a comment record in your account. */
export function commentCommand<R extends Base>(kind: Kind<R>): Command {
  return {
    name: `${kind.word} comment`,
    args: '<[handle/]repo> <id>',
    summary: `comment on a${kind.word === 'pr' ? ' pull request' : 'n issue'} (the comment is a record in your account)`,
    options: {
      body: { type: 'string', short: 'b', value: 'B', help: 'the comment (required)' },
      ...(kind.word === 'pr'
        ? {
            round: { type: 'string' as const, value: 'N', help: 'the round it reviews (0 is the first)' },
            path: {
              type: 'string' as const,
              value: 'P',
              help: "with --line and --round: a file of the round's diff",
            },
            line: {
              type: 'string' as const,
              value: 'L',
              help: "the line of --path (the round's head side, from 1)",
            },
          }
        : {}),
      json: JSON_OPTION,
    },
    positionals: { min: 2, max: 2 },
    async run({ ctx, io, args }) {
      const body = stringOption(args, 'body');
      if (body === undefined || body.trim() === '')
        throw new KnotlessError('usage', 'Say what to comment with --body.');
      const c = ctx();
      const { item, r } = await itemFor(c, io, kind, args);
      const roundText = stringOption(args, 'round');
      const rounds = (item.record as { rounds?: unknown[] }).rounds?.length ?? 0;
      // Decimal digits only: Number() would take '', ' 1', '0x1' and '1e0' as rounds too.
      const round =
        roundText === undefined ? undefined : /^[0-9]{1,6}$/.test(roundText) ? Number(roundText) : NaN;
      if (round !== undefined && (!Number.isSafeInteger(round) || round < 0 || round >= rounds))
        throw new KnotlessError(
          'usage',
          `--round must be one of the pull request's rounds, 0 to ${rounds - 1}.`,
        );
      const path = stringOption(args, 'path');
      const lineText = stringOption(args, 'line');
      const line = lineText === undefined ? undefined : /^[0-9]{1,7}$/.test(lineText) ? Number(lineText) : 0;
      if ((path === undefined) !== (line === undefined) || (path !== undefined && round === undefined))
        throw new KnotlessError('usage', '--path and --line go together, with --round.');
      if (line === 0) throw new KnotlessError('usage', '--line is a line number, 1 or more.');
      const auth = await activeSession(c);
      const { made, record } = await writeComment(r.store, auth, parseComment, {
        subject: item.uri,
        ...(round === undefined ? {} : { round }),
        ...(path === undefined || line === undefined ? {} : { path, line }),
        body,
      });
      if (args.values['json'] === true)
        io.out(safeJson({ ...itemJson(item), comment: { uri: made.uri, ...record } }));
      else io.out(made.uri);
    },
  };
}

/**
 * Writes a state record for an item in the session's account, after checking the authority rule
 * (format.md): the owner and its maintainers may set any state; the author only close or reopen
 * their own. A record the
 * rule would ignore or outrank is never written: the item must be in state `expect` after it (the
 * state written, unless only labels change).
 */
export async function writeState<R extends Base>(
  r: Reader,
  auth: SessionAuthorizer,
  kind: Kind<R>,
  target: Target,
  item: Item<R>,
  state: string,
  extra: Record<string, unknown> = {},
  expect: string = state,
): Promise<void> {
  await writeDecision(r.store, auth, kind.parseState, {
    ...(await stateWriteOf(r, auth, target, item, kind, state)),
    extra,
    expect,
  });
}

/**
 * What writing `state` for an item would be, for the authority rule (knotless-core's
 * `checkStateWrite`): asked before a write, or before work that ends in one (a merge).
 */
export async function stateWriteOf<R extends Base>(
  r: Reader,
  auth: SessionAuthorizer,
  target: Target,
  item: Item<R>,
  kind: Kind<R>,
  state: string,
): Promise<DecisionWrite> {
  const team = await r.team(target.owner, target.uri);
  return {
    me: auth.session.did,
    myName: auth.session.handle,
    owner: target.owner.did,
    maintainers: team.maintainers,
    label: target.label,
    author: item.did,
    current: item.state,
    authorMay: kind.authorMay,
    noun: kind.noun,
    state,
    id: item.id,
    subject: item.uri,
    labels: item.labels,
    ...(item.decisions === undefined ? {} : { decisions: item.decisions }),
    authorName: item.handle ?? item.did,
  };
}

/** `close` / `reopen`: one state record, when the rule lets you write it. */
export function stateCommand<R extends Base>(kind: Kind<R>, verb: 'close' | 'reopen'): Command {
  const state = verb === 'close' ? 'closed' : 'open';
  return {
    name: `${kind.word} ${verb}`,
    args: '<[handle/]repo> <id>',
    summary: `${verb} a${kind.word === 'pr' ? ' pull request' : 'n issue'} (the repository's owner or maintainers, or its author; a record in your account)`,
    options: { json: JSON_OPTION },
    positionals: { min: 2, max: 2 },
    async run({ ctx, io, args }) {
      const c = ctx();
      const { target, item, r } = await itemFor(c, io, kind, args);
      const auth = await activeSession(c);
      if (item.state === 'merged')
        throw new KnotlessError('usage', `${safeText(item.id)} is merged; there is nothing to ${verb}.`);
      // Already so, by this account's own decision too: an owner may still close what its author
      // withdrew, which the author could otherwise reopen.
      const team = await r.team(target.owner, target.uri);
      if (alreadyDecided(item.state, item.decisions ?? [], auth.session.did, state, team)) {
        io.err(`${safeText(item.id)} is already ${state}; nothing was written.`);
      } else {
        await writeState(r, auth, kind, target, item, state);
        io.err(`${verb === 'close' ? 'Closed' : 'Reopened'} ${safeText(item.id)}.`);
      }
      if (args.values['json'] === true) io.out(safeJson({ ...itemJson(item), state }));
      else io.out(item.id);
    },
  };
}

/** An item's labels as the CLI shows them (its views, `label`'s answer): the core's list, each label escaped for the terminal. */
export function labelsText(labels: readonly string[]): string {
  return labels.length === 0 ? 'no labels' : labelList(labels, (l) => safeText(l, MAX_LABEL));
}
