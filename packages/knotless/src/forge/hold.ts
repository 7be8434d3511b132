// Before a maintainer leaves a repository's team, what the repository held stays (format.md, "A
// removed maintainer"): once the owner's table no longer lists them, none of their records counts,
// so the owner first writes, in the owner's own account, each decision of theirs that is the team's
// latest on a pull request or issue of the repository. `repo maintainer remove` calls this before
// it writes the table.
import type { SessionAuthorizer } from '../auth/store.ts';
import { isKnotlessError } from 'knotless-core/errors';
import { safeText } from 'knotless-core/text/terminal';
import { writeDecision } from 'knotless-core/forge/decision';
import type { Identity } from 'knotless-core/identity/resolver';
import { heldDecision } from 'knotless-core/records/forge-authority';
import type { Stored } from 'knotless-core/forge/store';
import { ISSUES, PULLS, type Kind, type StateFields } from './kinds.ts';
import { parseAtUri } from './records.ts';
import { withStates, type Reader } from './subjects.ts';

type Base = { repo: string; title: string; createdAt: string };

/**
 * Copies into the owner's account (`auth`, the owner's session) every decision `removed` made that
 * is the team's latest on an item of `owner`'s repository `repo` (its at-uri; `label` names it in
 * sentences). Reads `removed`'s state records (every page), each item they name, and the team's and
 * author's decisions on those of this repository; writes one state record per decision kept.
 * Returns how many were written. Nothing is written when `removed` is not a maintainer.
 */
export async function holdDecisions(
  r: Reader,
  auth: SessionAuthorizer,
  owner: Identity,
  repo: string,
  label: string,
  removed: string,
): Promise<number> {
  const team = await r.team(owner, repo);
  if (!team.maintainers.includes(removed)) return 0;
  const kinds = [PULLS, ISSUES] as Kind<Base>[];
  let all: Stored<StateFields>[][];
  try {
    const who = await r.ctx.resolver.resolve(removed);
    all = await Promise.all(kinds.map((kind) => r.store.list(who, kind.stateCollection, kind.parseState)));
  } catch (err) {
    // Nobody can read the decisions of an account that resolves to nothing, or whose PDS cannot be
    // reached: the removal is the owner's way out of exactly that, so it goes on, and the note says
    // what stops counting.
    if (!isKnotlessError(err)) throw err;
    r.note(
      `warning: the decisions of ${safeText(removed)} could not be read (${err.message.replace(/\.$/, '')}); any that ${label}'s pull requests and issues held stop counting with the removal`,
    );
    return 0;
  }
  let written = 0;
  for (const [i, kind] of kinds.entries()) {
    const theirs = all[i]!;
    const items: Stored<Base>[] = [];
    for (const subject of new Set(theirs.map((s) => s.value.subject))) {
      const u = parseAtUri(subject);
      if (u === undefined || u.collection !== kind.collection) continue;
      const author = u.did === owner.did ? owner : await r.ctx.resolver.resolve(u.did);
      const stored = await r.store.get(author, kind.collection, u.rkey, kind.parse);
      // Only this repository's items: a maintainer's records on other repositories are theirs.
      if (stored !== undefined && stored.value.repo === repo) items.push(stored);
    }
    for (const item of await withStates(r, kind, owner, items)) {
      const held = heldDecision(item.decisions ?? [], team, removed);
      if (held === undefined) continue;
      await writeDecision(r.store, auth, kind.parseState, {
        me: owner.did,
        myName: auth.session.handle,
        owner: owner.did,
        maintainers: team.maintainers,
        label,
        author: item.did,
        current: item.state,
        authorMay: kind.authorMay,
        noun: kind.noun,
        state: held.state,
        id: item.id,
        subject: item.uri,
        labels: held.labels ?? [],
        extra: {
          ...(held.merged === undefined ? {} : { merged: held.merged }),
          ...(held.ignoredChecks === undefined ? {} : { ignoredChecks: held.ignoredChecks }),
        },
        decisions: item.decisions ?? [],
        authorName: item.handle ?? item.did,
        expect: item.state,
      });
      written++;
    }
  }
  return written;
}
