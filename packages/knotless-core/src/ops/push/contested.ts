import { SwapConflict, contestedSentence } from '../../records/remote-repo.ts';
import { printErr } from '../../text/terminal.ts';
import type { Update } from './check.ts';
import type { Listing, PushEnv, Written } from './job.ts';

/**
 * Pushes to refs that several records claim. Writing one would be choosing between them, so an
 * update is refused with one sentence; a delete removes every record that claims the ref (each
 * compare-and-swapped against what was listed), which is how the owner clears such a ref.
 */
export async function pushContested(env: PushEnv, listing: Listing, updates: Update[]): Promise<Written[]> {
  const { remote, auth } = env;
  const out: Written[] = [];
  for (const u of updates) {
    const claims = listing.contested.get(u.dst) ?? [];
    if (u.oid !== undefined) {
      printErr(`knotless: ${contestedSentence(u.dst, claims)}.`);
      out.push({ dst: u.dst, error: 'several records claim this ref' });
      continue;
    }
    if (env.options.dryRun) {
      out.push({ dst: u.dst });
      continue;
    }
    try {
      for (const c of claims) await remote.deleteRef(auth, c.key, c.cid);
      out.push({ dst: u.dst, record: null });
    } catch (err) {
      if (!(err instanceof SwapConflict)) throw err;
      out.push({ dst: u.dst, error: 'stale info', conflicted: true });
    }
  }
  return out;
}
