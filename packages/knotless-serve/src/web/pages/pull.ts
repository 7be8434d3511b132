import fs from 'node:fs';
import type { PullRow } from '../../db/forge-store.ts';
import { parseAtUri } from 'knotless-core/forge/records';
import type { StoredRound as Round } from '../../db/schema.ts';
import { log, mergeBase, resolveCommit } from '../../mirror/read.ts';
import { RoundUnavailable } from '../../mirror/round-packs.ts';
import { roundsOf } from '../xrpc/forge-views.ts';
import { copyField, html, href, page, when, type SafeHtml } from '../html.ts';
import { HttpError, type RepoTarget, type Site } from '../site.ts';
import { commitLink, repoHeader, short } from './common.ts';
import { pagedDiff } from './commit.ts';
import { commitList } from './commits.ts';
import { commentForm, labelPills, labelsForm, mergeForm, stateForm } from './forge-forms.ts';
import { indexedVerdict } from '../checks.ts';
import { checksBadge, checksList, mergeability } from './checks-view.ts';
import { authorDid, commentList, forgeItem, statePill, userText } from './forge-common.ts';
import { mergeWords, pullHref } from './pulls.ts';
import { chosenLine, lineNotes } from './line-notes.ts';
import type { LineNotes } from '../diff-view.ts';

/** Which diff the page shows: a round's own (base...head), or the interdiff from the round before. */
interface Shown {
  round: number;
  interdiff: boolean;
}

function shownOf(params: URLSearchParams, rounds: number): Shown {
  const raw = params.get('round');
  const n = raw === null ? rounds - 1 : Number(raw);
  if (!Number.isInteger(n) || n < 0 || n >= rounds)
    throw new HttpError(404, `This pull request has no round ${raw}.`);
  return { round: n, interdiff: params.get('interdiff') === '1' && n > 0 };
}

function link(self: string, s: Shown, pageNo?: number): string {
  const q = new URLSearchParams({ round: String(s.round) });
  if (s.interdiff) q.set('interdiff', '1');
  if (pageNo !== undefined) q.set('page', String(pageNo));
  return `${self}?${q.toString()}`;
}

function roundsTable(self: string, rounds: Round[], shown: Shown, badges: SafeHtml[]): SafeHtml {
  return html`<div class="box">
    <table class="list rounds">
      <caption class="sr">
        Rounds
      </caption>
      ${rounds.map((r, i) => {
        const current = i === shown.round;
        const mark = (on: boolean) => (on ? html`aria-current="true"` : '');
        return html`<tr>
          <td class="nowrap"><strong>Round ${i}</strong></td>
          <td class="mono nowrap">${short(r.base)}..${short(r.head)}</td>
          <td class="muted nowrap">${when(r.createdAt)}</td>
          <td class="nowrap">${badges[i]}</td>
          <td class="nowrap">
            <a href="${link(self, { round: i, interdiff: false })}" ${mark(current && !shown.interdiff)}
              >diff</a
            >
            ${
              i === 0
                ? ''
                : html` ·
                    <a href="${link(self, { round: i, interdiff: true })}" ${mark(current && shown.interdiff)}
                      >interdiff ${i - 1}→${i}</a
                    >`
            }
          </td>
        </tr>`;
      })}
    </table>
  </div>`;
}

/**
 * The selected diff: the round's commits (its pack fetched from the author's PDS into the target's
 * mirror when missing) against its base, or against the round before's head (the interdiff: what
 * changed between the two rounds; when the author rebased in between, base changes show too).
 */
async function roundDiff(
  site: Site,
  repo: RepoTarget,
  pull: PullRow,
  rounds: Round[],
  shown: Shown,
  pageNo: number,
  notes: LineNotes | undefined,
): Promise<SafeHtml> {
  if (!fs.existsSync(repo.gitDir))
    return html`<p class="muted">This repository is not mirrored yet, so the diff cannot be shown.</p>`;
  const round = rounds[shown.round]!;
  const prev = shown.interdiff ? rounds[shown.round - 1] : undefined;
  try {
    await site.mirror.loadRound(pull.did, repo.gitDir, round);
    if (prev !== undefined) await site.mirror.loadRound(pull.did, repo.gitDir, prev);
  } catch (err) {
    if (!(err instanceof RoundUnavailable)) throw err;
    return html`<p class="muted">The commits of this round cannot be shown: ${err.message}.</p>`;
  }
  let from: string;
  if (prev !== undefined) from = prev.head;
  else {
    if ((await resolveCommit(repo.gitDir, round.base)) === undefined)
      return html`<p class="muted">
        The round's base ${short(round.base)} is not in this repository any more (its branch was rewritten),
        so the diff cannot be shown.
      </p>`;
    from = (await mergeBase(repo.gitDir, round.base, round.head)) ?? round.base;
  }
  const self = pullHref(repo, pull);
  const commits = await log(repo.gitDir, `${from}..${round.head}`, 101);
  const heading =
    prev === undefined
      ? `Round ${shown.round}: changes`
      : `Interdiff: round ${shown.round - 1} → round ${shown.round}`;
  return html`<h2>${heading}</h2>
    <p class="muted">
      ${commitLink(repo, from)} → ${commitLink(repo, round.head)},
      ${commits.length > 100 ? 'more than 100' : commits.length} commit${commits.length === 1 ? '' : 's'}
    </p>
    ${commits.length === 0 ? '' : commitList(repo, commits.slice(0, 100))}
    ${await pagedDiff(repo, from, round.head, pageNo, (p) => link(self, shown, p), notes)}`;
}

/** The head's repository as `owner/name:` when it is not the target itself (a fork), else ''. */
async function headRepoName(site: Site, repo: RepoTarget, uri: string): Promise<string> {
  const u = parseAtUri(uri);
  if (u === undefined || (u.did === repo.did && u.rkey === repo.name)) return '';
  return `${(await site.index.owner(u.did))?.handle ?? u.did}/${u.rkey}:`;
}

/** `/<owner>/<repo>/pulls/<author>/<rkey>`: a pull request with its rounds, a diff and its comments. */
export async function pullPage(
  site: Site,
  repo: RepoTarget,
  author: string,
  rkey: string,
  params: URLSearchParams,
  pageNo: number,
): Promise<string> {
  const did = await authorDid(site, author);
  const pull = await forgeItem(site, repo, 'pulls', did, rkey);
  const rounds = roundsOf(pull);
  const shown = shownOf(params, rounds.length);
  const comments = await site.index.forge.comments('dev.knotless.pull', did, rkey);
  const self = pullHref(repo, pull);
  const headRepo = await headRepoName(site, repo, pull.head_repo);
  // Lines are commented on in a round's own diff, never an interdiff.
  const notes = shown.interdiff
    ? undefined
    : lineNotes(
        comments,
        shown.round,
        link(self, shown, pageNo > 1 ? pageNo : undefined),
        `${self}/comment`,
        chosenLine(params),
      );
  const id = `${pull.did}/${pull.rkey}`;
  const short = (await site.index.forge.shortIds('pulls', repo.did, repo.name)).get(pull.rkey) ?? pull.rkey;
  const merged = pull.merged === null ? '' : html`; merged as ${commitLink(repo, pull.merged)}`;
  // Each round head's checks, judged by the base branch's protection (from the index).
  const verdicts = await Promise.all(rounds.map((r) => indexedVerdict(site, repo, r.head, pull.base)));
  const verdict = pull.state === 'open' ? verdicts[verdicts.length - 1] : undefined;
  // A merge that overrode the base branch's protection says so to everyone, with each check and why.
  const ignored = pull.ignored_checks === null ? [] : (JSON.parse(pull.ignored_checks) as string[]);
  return page(
    `${pull.title} · Pull request · ${repo.owner}/${repo.name}`,
    html`${repoHeader(repo, undefined, 'pulls')}
      <h2 class="title">${pull.title} <span class="muted mono short">#${short}</span></h2>
      <p>
        ${statePill(pull.state)} ${mergeWords(pull, html`${headRepo}${pull.head_branch}`)}, opened
        ${when(pull.created_at)}${merged} ${labelPills(JSON.parse(pull.labels) as string[])}
      </p>
      ${
        ignored.length === 0
          ? ''
          : html`<p class="ignored-checks">
              Merged without its required checks:
              ${ignored.map((why, i) => html`${i === 0 ? '' : '; '}<span class="unmet">${why}</span>`)}.
            </p>`
      }
      <div class="box">${userText(pull.body)}</div>
      ${copyField('Check it out in a clone', `knotless pr checkout ${repo.owner}/${repo.name} ${id}`)}
      <h2>Rounds (${rounds.length})</h2>
      ${roundsTable(
        self,
        rounds,
        shown,
        rounds.map((r, i) => checksBadge(repo, r.head, verdicts[i]!)),
      )}
      ${await roundDiff(site, repo, pull, rounds, shown, pageNo, notes)}
      ${commentList(comments, (r) => (r < rounds.length ? link(self, { round: r, interdiff: false }) : '#'))}
      ${commentForm(`${self}/comment`, rounds.length)}
      ${verdict === undefined ? '' : html`${checksList(verdict)} ${mergeability(verdict, pull.base)}`}
      <p>
        ${mergeForm(
          repo,
          self,
          pull.state,
          rounds[rounds.length - 1]?.head,
          await resolveCommit(repo.gitDir, `refs/heads/${pull.base}`),
          verdict?.unmet ?? [],
        )}
        ${stateForm(repo, self, pull.did, pull.state)}
        ${labelsForm(repo, self, JSON.parse(pull.labels) as string[])}
      </p>
      <p class="muted">
        Or comment with
        <span class="mono">knotless pr comment ${repo.owner}/${repo.name} ${id} --body …</span>
      </p>
      <p><a href="${href(repo.owner, repo.name, 'pulls')}">← All pull requests</a></p>`,
  );
}
