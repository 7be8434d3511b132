import { activeSession } from '../../auth/login.ts';
import type { Context } from '../../context.ts';
import { configuredAppview, Webhooks } from '../../forge/webhooks.ts';
import { KnotlessError } from 'knotless-core/errors';
import { parseRepoSpec } from 'knotless-core/records/name';
import { safeText } from 'knotless-core/text/terminal';

/** What every `webhook` command's help says of where webhooks live and who may manage them. */
export const WEBHOOK_DETAILS =
  "Webhooks live at the appview (KNOTLESS_APPVIEW, which `knotless dev` sets), not in your account: each call carries a token your PDS signs for that appview and that one call. Only the repository's owner manages its webhooks; `<repo>` is one of yours (`name`, or `handle/name` naming your own account).";

/** The webhooks of `typed`, one of the logged-in account's own repositories. */
export async function webhooksOf(c: Context, typed: string): Promise<Webhooks> {
  const spec = parseRepoSpec(typed);
  const appview = configuredAppview(c);
  const auth = await activeSession(c);
  // `alice.test/site` is taken when it names your own account, as the repo commands do.
  if (spec.owner !== undefined && (await c.resolver.resolve(spec.owner)).did !== auth.session.did)
    throw new KnotlessError(
      'permission-denied',
      `Only a repository's owner manages its webhooks, and ${safeText(spec.owner)}/${spec.name} is not yours (you are ${safeText(auth.session.handle)}).`,
    );
  return new Webhooks(c, auth, appview, spec.name);
}
