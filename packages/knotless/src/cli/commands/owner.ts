import type { SessionAuthorizer } from '../../auth/store.ts';
import { activeSession } from '../../auth/login.ts';
import { KnotlessError } from 'knotless-core/errors';
import { parseRepoSpec } from 'knotless-core/records/name';
import type { RemoteRepo } from 'knotless-core/records/remote-repo';
import { safeText } from 'knotless-core/text/terminal';
import type { Io } from '../io.ts';
import type { Context } from '../../context.ts';
import type { Identity } from 'knotless-core/identity/resolver';

/** The account a read command is about: the one named, else the current one (no login needed to read). */
export async function ownerOf(ctx: Context, named: string | undefined): Promise<Identity> {
  if (named !== undefined) return ctx.resolver.resolve(named);
  const did = ctx.config.identifier ?? ctx.sessions.current();
  if (did === undefined) {
    throw new KnotlessError(
      'not-logged-in',
      'Name an account (e.g. alice.bsky.social), or log in with `knotless login <handle>`.',
    );
  }
  return ctx.resolver.resolve(did);
}

/** A repository of the logged-in account, for commands that write to it. */
export interface OwnRepo {
  auth: SessionAuthorizer;
  remote: RemoteRepo;
}

/**
 * Resolves `[handle/]name` to a repository for the current account to write (the current account's
 * own when no handle is named), whoever owns it: the write itself says who may.
 */
export async function namedRepo(ctx: Context, specText: string, io: Io): Promise<OwnRepo> {
  const spec = parseRepoSpec(specText);
  const auth = await activeSession(ctx);
  const mine = { did: auth.session.did, handle: auth.session.handle, pds: auth.session.pds };
  const owner = spec.owner === undefined ? mine : await ctx.resolver.resolve(spec.owner);
  return { auth, remote: ctx.remoteRepo(owner, spec.name, (m) => io.err(`knotless: warning: ${m}`)) };
}

/**
 * Resolves `[handle/]name` to a repository the current account may write (`verb` names the write
 * for the refusal), or fails with `permission-denied` when it belongs to someone else.
 */
export async function ownRepo(ctx: Context, specText: string, verb: string, io: Io): Promise<OwnRepo> {
  const named = await namedRepo(ctx, specText, io);
  const { owner, name } = named.remote;
  if (owner.did !== named.auth.session.did) {
    throw new KnotlessError(
      'permission-denied',
      `Only ${safeText(owner.handle ?? owner.did)} can ${verb} ${name}; you are ${safeText(named.auth.session.handle)}.`,
    );
  }
  return named;
}
