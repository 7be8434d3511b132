import type { PushReason } from '../../errors.ts';
import { contestedSentence } from '../../records/remote-repo.ts';
import { printErr } from '../../text/terminal.ts';
import { swapLoop } from '../swap-loop.ts';
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
    // One attempt: a claim that moved since it was listed is one this push did not see, and git's
    // rule for a delete from a value it did not see is to refuse it, without reading it again.
    const outcome = await swapLoop<null, null, Written, PushReason>({
      start: null,
      maxAttempts: 1,
      decide: () => Promise.resolve({ kind: 'write', write: null }),
      write: async () => {
        for (const c of claims) await remote.deleteRef(auth, c.key, c.cid);
        return { dst: u.dst, record: null };
      },
      reread: () => Promise.resolve({ kind: 'refuse', why: 'stale info' }),
    });
    out.push(
      outcome.kind === 'done'
        ? outcome.value
        : { dst: u.dst, error: outcome.kind === 'refused' ? outcome.why : 'stale info', conflicted: true },
    );
  }
  return out;
}
