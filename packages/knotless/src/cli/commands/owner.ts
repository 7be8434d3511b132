import { KnotlessError } from '../../errors.ts';
import type { Context } from '../../context.ts';
import type { Identity } from '../../identity/resolver.ts';

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
