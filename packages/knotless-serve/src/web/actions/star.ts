// Starring a repository from its page: a dev.knotless.star record in the reader's own account
// (created when the reader has none for it), and unstarring deletes every one of them. Which stars
// exist is read from the reader's own PDS, not the index, so a star written a moment ago and not yet
// indexed is found too.
import type http from 'node:http';
import { STAR, repoUri } from 'knotless-core/forge/records';
import type { Viewer } from '../../auth/web-sessions.ts';
import { href } from '../html.ts';
import type { RepoTarget, Site } from '../site.ts';
import { checkedRecord, forgeStore, seeOther, untilIndexed, writerFor } from './forge-env.ts';

export async function star(
  site: Site,
  viewer: Viewer,
  repo: RepoTarget,
  on: boolean,
  res: http.ServerResponse,
): Promise<void> {
  const auth = await writerFor(site, viewer);
  const store = forgeStore(site);
  const subject = repoUri(repo.did, repo.name);
  const mine = (
    await store.list(auth.session, STAR, (v) => Promise.resolve(v as { subject?: unknown }))
  ).filter((r) => r.value.subject === subject);
  const indexed = () => site.index.forge.starsBy(viewer.did, repo.did, repo.name);
  if (on && mine.length === 0) {
    const made = await store.create(
      auth,
      STAR,
      await checkedRecord(STAR, { subject, createdAt: new Date().toISOString() }),
    );
    await untilIndexed(async () => (await indexed()).includes(made.rkey));
  } else if (!on) {
    for (const r of mine) await store.delete(auth, STAR, r.rkey);
    await untilIndexed(async () => (await indexed()).length === 0);
  }
  seeOther(res, href(repo.owner, repo.name));
}
