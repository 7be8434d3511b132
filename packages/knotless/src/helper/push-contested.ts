import type { Authorizer } from 'knotless-core/xrpc/client';
import { SwapConflict, contestedSentence, type RemoteRepo } from 'knotless-core/records/remote-repo';
import { printErr } from 'knotless-core/text/terminal';
import type { Update } from './push-check.ts';
import type { Written } from './push-write.ts';
import type { HelperState } from './state.ts';

/**
 * Pushes to refs that several records claim. Writing one would be choosing between them, so an
 * update is refused with one sentence; a delete removes every record that claims the ref (each
 * compare-and-swapped against what was listed), which is how the owner clears such a ref.
 */
export async function pushContested(
  state: HelperState,
  remote: RemoteRepo,
  auth: Authorizer,
  updates: Update[],
): Promise<Written[]> {
  const out: Written[] = [];
  for (const u of updates) {
    const claims = state.contested.get(u.dst) ?? [];
    if (u.oid !== undefined) {
      printErr(`knotless: ${contestedSentence(u.dst, claims)}.`);
      out.push({ dst: u.dst, error: 'several records claim this ref' });
      continue;
    }
    if (state.options.dryRun) {
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
