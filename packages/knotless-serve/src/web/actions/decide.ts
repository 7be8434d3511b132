// The decisions on a pull request or issue from the browser: close, reopen, labels (a state
// record in the deciding account, written only when the authority rule lets it count) and the
// merge (the owner's or a maintainer's).
import type http from 'node:http';
import { KnotlessError } from 'knotless-core/errors';
import { ignoredChecks, pastChecksRefusal, unmetSentence } from 'knotless-core/forge/checks';
import { mergePull } from 'knotless-core/forge/merge';
import {
  alreadyDecided,
  checkLabel,
  parseLabelList,
  checkLabelCount,
  checkLabelWrite,
  labelDecision,
  writeDecision,
} from 'knotless-core/forge/decision';
import { PULL } from 'knotless-core/forge/records';
import { checkStateWrite } from 'knotless-core/forge/state-write';
import { ISSUE_AUTHOR_MAY, PULL_AUTHOR_MAY, type Team } from 'knotless-core/records/forge-authority';
import { readMaintainers } from 'knotless-core/records/maintainers';
import type { Viewer } from '../../auth/web-sessions.ts';
import { forgeRecords } from '../../model/forge-records.ts';
import { verdictOf } from '../checks.ts';
import { HttpError, type RepoTarget, type Site } from '../site.ts';
import {
  field,
  forgeStore,
  identityOf,
  remoteRepo,
  seeOther,
  untilIndexed,
  writerFor,
  type Form,
  type ItemRef,
} from './forge-env.ts';

/**
 * The state record of a close, reopen, merge or labelling, when the authority rule lets the reader
 * write it and it would count: decided again with the records already on the item (the index's),
 * it must leave the item `expect` (the state written, unless only labels change).
 */
async function writeState(
  site: Site,
  viewer: Viewer,
  repo: RepoTarget,
  item: ItemRef,
  state: string,
  extra: Record<string, unknown> = {},
  expect = state,
): Promise<void> {
  const w = stateWrite(viewer, repo, item, state);
  checkStateWrite(w);
  const decisions = await site.index.forge.decisions(item.kind, item.did, item.rkey);
  const authorName = (await identityOf(site, item.did)).handle ?? item.did;
  const read = item.kind === 'pulls' ? forgeRecords.pullStatus : forgeRecords.issueState;
  const auth = await writerFor(site, viewer);
  await writeDecision(forgeStore(site), auth, read, {
    ...w,
    subject: item.uri,
    labels: item.labels,
    extra,
    decisions,
    authorName,
    expect,
  });
}

/** Who decides for the repository: its owner and the maintainers its table lists, as indexed. */
function team(repo: RepoTarget): Team {
  return { owner: repo.did, maintainers: repo.maintainers.map((m) => m.did) };
}

/** Who writes which state on which item: what the authority rule's checks are given. */
function stateWrite(viewer: Viewer, repo: RepoTarget, item: ItemRef, state: string) {
  const pulls = item.kind === 'pulls';
  return {
    me: viewer.did,
    myName: viewer.handle,
    owner: repo.did,
    maintainers: repo.maintainers.map((m) => m.did),
    label: `${repo.owner}/${repo.name}`,
    author: item.did,
    current: item.state,
    authorMay: pulls ? PULL_AUTHOR_MAY : ISSUE_AUTHOR_MAY,
    noun: pulls ? ('pull request' as const) : ('issue' as const),
    state,
    id: `${item.did}/${item.rkey}`,
  };
}

/** Waits until the index shows the item's row as `done` says (the write is read back, not assumed). */
async function untilRow(
  site: Site,
  item: ItemRef,
  done: (row: { state: string; labels: string } | undefined) => boolean,
): Promise<void> {
  await untilIndexed(async () =>
    done(
      item.kind === 'issues'
        ? await site.index.forge.issue(item.did, item.rkey)
        : await site.index.forge.pull(item.did, item.rkey),
    ),
  );
}

const untilState = (site: Site, item: ItemRef, state: string) =>
  untilRow(site, item, (row) => row?.state === state);

export async function setState(
  site: Site,
  viewer: Viewer,
  repo: RepoTarget,
  item: ItemRef,
  form: Form,
  res: http.ServerResponse,
) {
  const state = form.get('state');
  if (state !== 'open' && state !== 'closed') throw new HttpError(400, 'A state is open or closed.');
  if (item.state === 'merged')
    throw new HttpError(409, 'This pull request is merged; there is nothing to change.');
  const decisions = await site.index.forge.decisions(item.kind, item.did, item.rkey);
  if (!alreadyDecided(item.state, decisions, viewer.did, state, team(repo))) {
    await writeState(site, viewer, repo, item, state);
    await untilState(site, item, state);
  }
  seeOther(res, item.page);
}

/** The owner's merge button: refused while the base branch's required checks have not passed. */
export function merge(
  site: Site,
  viewer: Viewer,
  repo: RepoTarget,
  item: ItemRef,
  form: Form,
  res: http.ServerResponse,
) {
  return mergeAs(site, viewer, repo, item, form, res, false);
}

/**
 * The owner's "Merge without checks" button: merges whatever the required checks say, and the
 * merged status records each one that had not passed and why, as `knotless pr merge --ignore-checks`.
 */
export function mergeWithoutChecks(
  site: Site,
  viewer: Viewer,
  repo: RepoTarget,
  item: ItemRef,
  form: Form,
  res: http.ServerResponse,
) {
  return mergeAs(site, viewer, repo, item, form, res, true);
}

/**
 * The owner or a maintainer merges the pull request's last round, the one the page showed
 * (`head`): a round added since is not merged unseen. Into a protected branch the round's head
 * must have passed the branch's required checks (read from the owner's and the trusted runners'
 * PDSes, by the core's rule, as the CLI reads them) unless `ignore`, which is the owner's alone.
 * The core's merge builds the result from the repository's packs and the round's pack, uploads the
 * new pack to the merging account's PDS and moves the branch as a push would (with
 * compare-and-swap, or into a maintainer's own table); then the merged status goes into that account.
 */
async function mergeAs(
  site: Site,
  viewer: Viewer,
  repo: RepoTarget,
  item: ItemRef,
  form: Form,
  res: http.ServerResponse,
  ignore: boolean,
) {
  const reviewed = field(form, 'head', 'the reviewed head');
  // Refused before any work: only the owner and the maintainers merge (the same rule a status
  // record is written under); the core's merge reads the owner's table again before it writes.
  checkStateWrite(stateWrite(viewer, repo, item, 'merged'));
  if (item.state !== 'open')
    throw new HttpError(409, `This pull request is ${item.state}; only an open one merges.`);
  const author = await identityOf(site, item.did);
  const raw = await forgeStore(site).getRaw(author, PULL, item.rkey);
  if (raw === undefined) throw new HttpError(404, "The pull request is no longer in its author's account.");
  const pull = await forgeRecords.pull(raw.value);
  const last = pull.rounds[pull.rounds.length - 1]!;
  if (last.head !== reviewed)
    throw new HttpError(
      409,
      'The pull request has a new round since this page was loaded; review it and merge again.',
    );
  const owner = await identityOf(site, repo.did);
  const target = remoteRepo(site, owner, repo.name);
  // Whose protection counts is the owner's table as it is now, read from the owner's PDS like the
  // protection records themselves: the index may not have heard of a maintainer just added (whose
  // requirements must hold) or just removed (whose must not).
  const maintainers = ((await readMaintainers(target))?.maintainers ?? []).map((m) => m.did);
  const verdict = await verdictOf(site, repo, last.head, pull.base, maintainers);
  const past = pastChecksRefusal({ did: repo.did, name: repo.owner }, viewer.did, verdict.unmet, ignore);
  if (past !== undefined) throw new HttpError(403, past);
  if (verdict.unmet.length > 0 && !ignore) {
    const short = (await site.index.forge.shortIds('pulls', repo.did, repo.name)).get(item.rkey) ?? item.rkey;
    throw new HttpError(
      409,
      unmetSentence(short, pull.base, last.head, verdict.unmet, '"Merge without checks"'),
    );
  }
  const ignored = ignore ? ignoredChecks(verdict.unmet) : [];
  const auth = await writerFor(site, viewer);
  const baseTip = form.get('base') ?? undefined;
  const result = await mergePull(site.forge, {
    target,
    auth,
    pusher: { did: viewer.did, handle: viewer.handle },
    author,
    pull,
    id: `${item.did}/${item.rkey}`,
    method: 'merge',
    ...(baseTip === undefined ? {} : { expectBase: baseTip }),
  }).catch((err: unknown) => {
    if (err instanceof KnotlessError && err.code === 'remote-changed')
      throw new HttpError(
        409,
        `${pull.base} moved since this page was loaded (someone pushed); nothing was written: reload it and merge again.`,
      );
    throw err;
  });
  await writeState(site, viewer, repo, item, 'merged', {
    merged: result.after,
    ...(ignored.length === 0 ? {} : { ignoredChecks: ignored }),
  });
  await untilState(site, item, 'merged');
  seeOther(res, item.page);
}

/**
 * The owner's labels: the whole list from the form (comma-separated), in a state record that keeps
 * the item's state (and merged commit).
 */
export async function setLabels(
  site: Site,
  viewer: Viewer,
  repo: RepoTarget,
  item: ItemRef,
  form: Form,
  res: http.ServerResponse,
) {
  checkLabelWrite(stateWrite(viewer, repo, item, item.state));
  const labels = parseLabelList(form.get('labels') ?? '');
  for (const l of labels) checkLabel(l);
  checkLabelCount(labels, stateWrite(viewer, repo, item, item.state).noun);
  const merged = item.kind === 'pulls' ? (await site.index.forge.pull(item.did, item.rkey))?.merged : null;
  const decisions = await site.index.forge.decisions(item.kind, item.did, item.rkey);
  const d = labelDecision(decisions, team(repo), labels, merged ?? undefined);
  await writeState(site, viewer, repo, { ...item, labels }, d.state, d.extra, item.state);
  const want = JSON.stringify(labels);
  await untilRow(site, item, (row) => row?.labels === want);
  seeOther(res, item.page);
}
