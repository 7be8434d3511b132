// The signed-in reader's notifications (db/notifications.ts): a page that marks them seen, and an
// Atom feed at an address with a private token, made on request and shown once.
import type http from 'node:http';
import type { Notice } from '../../db/notifications.ts';
import { csrfField } from '../forms.ts';
import { href, html, page, when, type SafeHtml } from '../html.ts';
import { repoTarget } from '../route-table.ts';
import { HttpError, type Site } from '../site.ts';
import { forgeItem, forgeRepo } from './forge-common.ts';
import { viewer } from '../viewer.ts';
import { atomXml, type AtomEntry } from '../atom.ts';

/** One notice as a sentence: who did what to which item. */
function sentence(n: Notice, who: string): string {
  const what = n.item.tab === 'pulls' ? 'pull request' : 'issue';
  switch (n.kind) {
    case 'pull':
    case 'issue':
      return `${who} opened the ${what} “${n.item.title}”`;
    case 'comment':
      return `${who} commented on the ${what} “${n.item.title}”`;
    case 'mention':
      return `${who} mentioned you on the ${what} “${n.item.title}”`;
    case 'decision':
      return `${who} marked your ${what} “${n.item.title}” ${n.detail}`;
    case 'check':
      return `${who}'s check “${n.detail}” failed on your ${what} “${n.item.title}”`;
  }
}

async function named(site: Site, did: string): Promise<string> {
  return (await site.index.owner(did))?.handle ?? did;
}

function itemHref(n: Notice, repoOwner: string): string {
  return href(repoOwner, n.item.repoName, n.item.tab, n.item.did, n.item.rkey);
}

/**
 * Whether a notice's page opens for its reader, by that page's own rules: the repository known
 * here and its account active, not private (a private repository keeps no pull requests or
 * issues, so its name is not shown either), and the item still there and of that repository.
 * Anyone can write a record naming any repository, so a notice is kept only when it passes.
 */
export function opensFor(site: Site): (n: Notice) => Promise<boolean> {
  return async (n) => {
    try {
      const repo = forgeRepo(await repoTarget(site, await named(site, n.item.repoDid), n.item.repoName));
      await forgeItem(site, repo, n.item.tab, n.item.did, n.item.rkey);
      return true;
    } catch (err) {
      if (err instanceof HttpError) return false;
      throw err;
    }
  };
}

/** `/-/notifications`: the newest notifications; seeing them clears the header's count. */
export async function notificationsPage(site: Site, feedUrl?: string): Promise<string> {
  const v = viewer();
  if (v === undefined) throw new HttpError(401, 'Sign in to see your notifications.');
  const notices = await site.notifications.list(v.did, v.handle, opensFor(site));
  await site.notifications.seen(v.did);
  const rows: SafeHtml[] = [];
  for (const n of notices) {
    const text = sentence(n, await named(site, n.did));
    rows.push(
      html`<tr>
        <td><a href="${itemHref(n, await named(site, n.item.repoDid))}">${text}</a></td>
        <td class="muted nowrap">${when(n.time)}</td>
      </tr>`,
    );
  }
  return page(
    'Notifications',
    html`<h1>Notifications</h1>
      ${
        rows.length === 0
          ? html`<p class="muted">
              Nothing yet: pull requests and issues on your repositories, comments, decisions and failing
              checks on yours, and mentions of @${v.handle} will show here.
            </p>`
          : html`<div class="box">
              <table class="list">
                <caption class="sr">
                  Notifications
                </caption>
                ${rows}
              </table>
            </div>`
      }
      <h2>Feed</h2>
      ${
        feedUrl === undefined
          ? html`<p class="muted">
              An Atom feed of these, at a private address: anyone with the address can read it. Making a new
              address ends the previous one.
            </p>`
          : html`<p>Your feed's address (shown once; keep it private):</p>
              <p><code class="feedurl">${feedUrl}</code></p>`
      }
      <form method="post" action="/-/notifications/feed">
        ${csrfField()}<button type="submit">Make a new feed address</button>
      </form>`,
  );
}

/** POST `/-/notifications/feed`: a new token, and the page showing its address. */
export async function newFeed(site: Site): Promise<string> {
  const v = viewer();
  if (v === undefined) throw new HttpError(401, 'Sign in to see your notifications.');
  const token = await site.notifications.newFeedToken(v.did);
  return notificationsPage(site, `${site.publicUrl}/-/notifications.atom?token=${token}`);
}

/** `/-/notifications.atom?token=…`: the feed of the account the token belongs to. */
export async function notificationsFeed(site: Site, token: string, res: http.ServerResponse): Promise<void> {
  const did = await site.notifications.feedOwner(token);
  if (did === undefined)
    throw new HttpError(404, 'No feed has this address; make a new one on your notifications page.');
  const handle = await named(site, did);
  const notices = await site.notifications.list(did, handle, opensFor(site));
  const entries: AtomEntry[] = [];
  for (const n of notices) {
    const url = `${site.publicUrl}${itemHref(n, await named(site, n.item.repoDid))}`;
    const title = sentence(n, await named(site, n.did));
    entries.push({
      id: `${url}#${n.kind}-${n.did}-${n.time}`,
      title,
      link: url,
      updated: n.time,
      author: await named(site, n.did),
      content: n.detail === '' ? title : n.detail,
    });
  }
  const feed = atomXml({
    id: `${site.publicUrl}/-/notifications/${did}`,
    title: `knotless notifications for ${handle}`,
    link: `${site.publicUrl}/-/notifications`,
    updated: notices[0]?.time ?? new Date(0).toISOString(),
    entries,
  });
  res
    .writeHead(200, {
      'content-type': 'application/atom+xml; charset=utf-8',
      'x-content-type-options': 'nosniff',
      'cache-control': 'private, no-store',
      'referrer-policy': 'no-referrer',
    })
    .end(feed);
}
