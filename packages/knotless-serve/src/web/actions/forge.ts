// The forge from the browser, as the signed-in reader: each action writes the record the CLI
// would, into the reader's own account, through the core's operations and with the CLI's checks.
import type http from 'node:http';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { writeComment } from 'knotless-core/forge/comment';
import { makeRound, branchOf, roundEnds } from 'knotless-core/forge/packs';
import { ISSUE, PULL, atUri, isValidBranch, repoUri } from 'knotless-core/forge/records';
import { isValidRepoName } from 'knotless-core/records/name';
import type { Viewer } from '../../auth/web-sessions.ts';
import { href } from '../html.ts';
import { noForgeWhenPrivate } from '../pages/forge-common.ts';
import { HttpError, type RepoTarget, type Site } from '../site.ts';
import { MAX_FORM_BYTES, SIGN_IN_TO_ACT, signedIn, type Route, type RouteContext } from '../route-table.ts';
import { forgeRecords } from '../../model/forge-records.ts';
import { merge, mergeWithoutChecks, setLabels, setState } from './decide.ts';
import { signInLapsed } from './sign-in-lapsed.ts';
import { star } from './star.ts';
import {
  asPage,
  checkedRecord,
  forgeStore,
  identityOf,
  remoteRepo,
  untilIndexed,
  writerFor,
  field,
  seeOther,
  type Form,
  type ItemRef,
} from './forge-env.ts';

function optional(form: Form, name: string): string | undefined {
  const v = (form.get(name) ?? '').trim();
  return v === '' ? undefined : v;
}

/**
 * A POST under `/<owner>/<repo>/`: the repository's, refused for a private one, with a core
 * operation's refusal (a KnotlessError) answered as a page.
 */
function repoAction(
  path: string,
  act: (ctx: RouteContext, viewer: Viewer, repo: RepoTarget) => Promise<void>,
): Route {
  return {
    method: 'POST',
    path: `/:owner/:repo/${path}`,
    answers: 'html',
    signIn: SIGN_IN_TO_ACT,
    csrf: true,
    form: MAX_FORM_BYTES,
    async handle(ctx) {
      const repo = await ctx.repo();
      // Pull requests and issues are public records: a private repository takes none (as the CLI refuses).
      if (repo.private) throw new HttpError(403, noForgeWhenPrivate(repo));
      await asPage(
        () => act(ctx, signedIn(ctx), repo),
        (sentence) => signInLapsed(ctx.site, ctx.res, ctx.form, ctx.url.pathname, sentence),
      );
      return undefined;
    },
  };
}

/** An action on one issue or pull request: `/<owner>/<repo>/<kind>/<author>/<rkey>/<verb>`. */
function itemAction(
  kind: 'issues' | 'pulls',
  verb: string,
  act: (
    site: Site,
    viewer: Viewer,
    repo: RepoTarget,
    item: ItemRef,
    form: Form,
    res: http.ServerResponse,
  ) => Promise<void>,
): Route {
  return repoAction(`${kind}/:author/:rkey/${verb}`, async (ctx, viewer, repo) => {
    const item = await itemOf(ctx.site, repo, kind, ctx.params['author']!, ctx.params['rkey']!);
    await act(ctx.site, viewer, repo, item, ctx.form, ctx.res);
  });
}

/** The forge's forms: star, open, comment, decide, merge (and merge overriding the required checks). */
export const forgeRoutes: Route[] = [
  repoAction('star', (ctx, v, repo) => star(ctx.site, v, repo, true, ctx.res)),
  repoAction('unstar', (ctx, v, repo) => star(ctx.site, v, repo, false, ctx.res)),
  repoAction('issues/new', (ctx, v, repo) => openIssue(ctx.site, v, repo, ctx.form, ctx.res)),
  repoAction('pulls/new', (ctx, v, repo) => openPull(ctx.site, v, repo, ctx.form, ctx.res)),
  ...(['issues', 'pulls'] as const).flatMap((kind) => [
    itemAction(kind, 'comment', comment),
    itemAction(kind, 'state', setState),
    itemAction(kind, 'labels', setLabels),
  ]),
  itemAction('pulls', 'merge', merge),
  itemAction('pulls', 'merge-without-checks', mergeWithoutChecks),
];

async function itemOf(
  site: Site,
  repo: RepoTarget,
  kind: 'issues' | 'pulls',
  author: string,
  rkey: string,
): Promise<ItemRef> {
  const did = author.startsWith('did:') ? author : (await site.index.owner(author))?.did;
  const row =
    did === undefined
      ? undefined
      : kind === 'issues'
        ? await site.index.forge.issue(did, rkey)
        : await site.index.forge.pull(did, rkey);
  if (row === undefined || row.repo_did !== repo.did || row.repo_name !== repo.name)
    throw new HttpError(404, `No such ${kind === 'issues' ? 'issue' : 'pull request'} in this repository.`);
  return {
    kind,
    did: row.did,
    rkey: row.rkey,
    uri: atUri(row.did, kind === 'issues' ? ISSUE : PULL, row.rkey),
    state: row.state,
    labels: JSON.parse(row.labels) as string[],
    page: href(repo.owner, repo.name, kind, row.did, row.rkey),
  };
}

async function openIssue(site: Site, viewer: Viewer, repo: RepoTarget, form: Form, res: http.ServerResponse) {
  const title = field(form, 'title', 'the issue a title');
  const body = optional(form, 'body');
  const record = await checkedRecord(ISSUE, {
    repo: repoUri(repo.did, repo.name),
    title,
    ...(body === undefined ? {} : { body }),
    createdAt: new Date().toISOString(),
  });
  const auth = await writerFor(site, viewer);
  const made = await forgeStore(site).create(auth, ISSUE, record);
  await untilIndexed(async () => (await site.index.forge.issue(viewer.did, made.rkey)) !== undefined);
  seeOther(res, href(repo.owner, repo.name, 'issues', viewer.did, made.rkey));
}

async function comment(
  site: Site,
  viewer: Viewer,
  _repo: RepoTarget,
  item: ItemRef,
  form: Form,
  res: http.ServerResponse,
) {
  const body = field(form, 'body', 'the comment some text');
  const roundText = optional(form, 'round');
  let round: number | undefined;
  if (roundText !== undefined) {
    const pull = item.kind === 'pulls' ? await site.index.forge.pull(item.did, item.rkey) : undefined;
    const rounds = pull === undefined ? 0 : (JSON.parse(pull.rounds) as unknown[]).length;
    round = /^[0-9]{1,6}$/.test(roundText) ? Number(roundText) : NaN;
    if (!(round >= 0 && round < rounds))
      throw new HttpError(400, "That is not one of the pull request's rounds.");
  }
  const path = optional(form, 'path');
  const lineText = optional(form, 'line');
  const line = lineText === undefined ? undefined : /^[0-9]{1,7}$/.test(lineText) ? Number(lineText) : 0;
  if (
    (path === undefined) !== (line === undefined) ||
    line === 0 ||
    (path !== undefined && round === undefined)
  )
    throw new HttpError(400, 'A comment on a line names a round, a file of its diff and a line number.');
  const auth = await writerFor(site, viewer);
  const { made } = await writeComment(forgeStore(site), auth, forgeRecords.comment, {
    subject: item.uri,
    ...(round === undefined ? {} : { round }),
    ...(path === undefined || line === undefined ? {} : { path, line }),
    body,
  });
  const collection = item.kind === 'issues' ? ISSUE : PULL;
  await untilIndexed(async () =>
    (await site.index.forge.comments(collection, item.did, item.rkey)).some(
      (c) => c.did === viewer.did && c.rkey === made.rkey,
    ),
  );
  seeOther(
    res,
    path === undefined ? `${item.page}#comments` : `${item.page}?round=${String(round)}#lc-${made.rkey}`,
  );
}

/**
 * Opens a pull request into this repository from `head_repo` (`handle/name`, the reader's fork or
 * this repository) and `head_branch`: the round's pack is built from the two repositories' packs
 * and uploaded to the reader's PDS, and the pull request record written there.
 */
async function openPull(site: Site, viewer: Viewer, repo: RepoTarget, form: Form, res: http.ServerResponse) {
  const title = field(form, 'title', 'the pull request a title');
  const body = optional(form, 'body');
  const base = field(form, 'base', 'the branch to merge into');
  const branch = field(form, 'head_branch', 'the branch to merge');
  const headSpec = field(form, 'head_repo', 'the repository to merge from');
  const slash = headSpec.lastIndexOf('/');
  const headOwnerName = headSpec.slice(0, slash);
  const headName = headSpec.slice(slash + 1);
  if (slash <= 0 || !isValidRepoName(headName)) throw new HttpError(400, `${headSpec} is not a repository.`);
  if (!isValidBranch(base) || !isValidBranch(branch)) throw new HttpError(400, 'A branch name is not valid.');
  const headOwner = await site.index.owner(headOwnerName);
  if (headOwner === undefined) throw new HttpError(404, `No account ${headOwnerName} is known here.`);
  const draft = {
    repo: repoUri(repo.did, repo.name),
    base,
    head: { repo: repoUri(headOwner.did, headName), branch },
    title,
    ...(body === undefined ? {} : { body }),
  };
  const target = remoteRepo(site, await identityOf(site, repo.did), repo.name);
  const head = remoteRepo(site, await identityOf(site, headOwner.did), headName);
  // The branch must exist on the PDS before any upload (a sentence, not a half-made round).
  await roundEnds(branchOf, target, base, head, branch);
  const auth = await writerFor(site, viewer);
  const round = await makeRound(
    site.forge,
    auth,
    target,
    base,
    head,
    branch,
    new BlobCache(site.forge.config.cacheDir),
  );
  if (round.head === round.base)
    throw new HttpError(400, `${branch} holds nothing that ${base} lacks; nothing was written.`);
  const record = await checkedRecord(PULL, {
    ...draft,
    rounds: [round],
    createdAt: new Date().toISOString(),
  });
  const made = await forgeStore(site).create(auth, PULL, record);
  await untilIndexed(async () => (await site.index.forge.pull(viewer.did, made.rkey)) !== undefined);
  seeOther(res, href(repo.owner, repo.name, 'pulls', viewer.did, made.rkey));
}
