// A repository's webhooks, for its owner only: the settings page (each webhook with its last
// deliveries and their answers), and the forms that add one (its secret shown once, on the answer
// to the form, never in an address), send a test ping, redeliver a delivery and remove one.
import type http from 'node:http';
import type { DeliveryView, WebhookView } from '../../db/webhook-store.ts';
import { webhookTarget } from '../../webhooks/target.ts';
import { csrfField, postButton } from '../forms.ts';
import { copyField, html, href, page, when, type SafeHtml } from '../html.ts';
import { repoHeader } from '../pages/common.ts';
import { MAX_FORM_BYTES, signedIn, type Route, type RouteContext } from '../route-table.ts';
import { HttpError, type RepoTarget } from '../site.ts';
import { seeOther } from './forge-env.ts';

const SIGN_IN = 'Sign in to manage webhooks.';
/** The longest secret an owner may give. */
const MAX_SECRET = 256;

/** The repository, when the signed-in reader owns it; 403 otherwise. */
async function ownRepo(ctx: RouteContext): Promise<RepoTarget> {
  const repo = await ctx.repo();
  const v = signedIn(ctx);
  if (v.did !== repo.did)
    throw new HttpError(
      403,
      `Only ${repo.owner} can manage the webhooks of ${repo.owner}/${repo.name}; you are ${v.handle}.`,
    );
  return repo;
}

function settingsHref(repo: RepoTarget, ...rest: string[]): string {
  return href(repo.owner, repo.name, 'settings', 'webhooks', ...rest);
}

function delivery(repo: RepoTarget, hook: WebhookView, d: DeliveryView): SafeHtml {
  const last = d.log[0];
  return html`<tr>
    <td>${d.event}</td>
    <td>${d.state}</td>
    <td>${last === undefined ? '' : when(last.at)}</td>
    <td>${last?.status == null ? '' : String(last.status)}</td>
    <td>${last?.error ?? ''}</td>
    <td>${String(d.attempts)}</td>
    <td>${postButton(settingsHref(repo, hook.id, 'redeliver'), 'Redeliver', { delivery: d.id })}</td>
  </tr>`;
}

async function hookSection(ctx: RouteContext, repo: RepoTarget, hook: WebhookView): Promise<SafeHtml> {
  const log = await ctx.site.index.webhooks.deliveries(hook.id);
  return html`<section class="webhook">
    <h3>${hook.url}</h3>
    <p class="muted">added ${when(hook.created_at)}</p>
    <p>
      ${postButton(settingsHref(repo, hook.id, 'test'), 'Send a test')}
      ${postButton(settingsHref(repo, hook.id, 'remove'), 'Remove')}
    </p>
    ${
      log.length === 0
        ? html`<p class="muted">No deliveries yet.</p>`
        : html`<table class="list">
            <caption>
              Last deliveries
            </caption>
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">State</th>
                <th scope="col">Last attempt</th>
                <th scope="col">Status</th>
                <th scope="col">Error</th>
                <th scope="col">Attempts</th>
                <th scope="col"><span class="muted">Action</span></th>
              </tr>
            </thead>
            <tbody>
              ${log.map((d) => delivery(repo, hook, d))}
            </tbody>
          </table>`
    }
  </section>`;
}

/** The settings page; `notice` above the list (a refusal, or a new webhook's secret). */
async function settingsPage(ctx: RouteContext, repo: RepoTarget, notice?: SafeHtml): Promise<string> {
  const hooks = await ctx.site.index.webhooks.list(repo.did, repo.name);
  const body = html`${repoHeader(repo, undefined, 'settings')}
    <h2>Webhooks</h2>
    ${notice ?? ''}
    <p class="muted">
      Each event of this repository (pushes, pull requests, issues, comments) is posted as JSON to every
      webhook here, signed with its secret in <code>X-Knotless-Signature-256</code>.
    </p>
    ${await Promise.all(hooks.map((h) => hookSection(ctx, repo, h)))}
    <h3>Add a webhook</h3>
    <form class="stack" method="post" action="${settingsHref(repo)}">
      ${csrfField()}
      <label for="webhook-url">Receiver's address</label>
      <input id="webhook-url" name="url" type="url" required placeholder="https://example.com/hook" />
      <label for="webhook-secret">Secret (leave empty to have one made)</label>
      <input id="webhook-secret" name="secret" autocomplete="off" />
      <p><button type="submit">Add webhook</button></p>
    </form>`;
  return page(`Webhooks · ${repo.owner}/${repo.name}`, body);
}

async function add(ctx: RouteContext): Promise<string> {
  const repo = await ownRepo(ctx);
  const target = await webhookTarget(ctx.form.get('url') ?? '', ctx.site.dev);
  const given = (ctx.form.get('secret') ?? '').trim();
  if ('refused' in target) {
    ctx.res.statusCode = 400;
    return settingsPage(ctx, repo, html`<p class="error" role="alert">${target.refused}</p>`);
  }
  if (given.length > MAX_SECRET) {
    ctx.res.statusCode = 400;
    return settingsPage(
      ctx,
      repo,
      html`<p class="error" role="alert">A secret is at most ${String(MAX_SECRET)} characters.</p>`,
    );
  }
  const hook = await ctx.site.index.webhooks.add(repo.did, repo.name, target.url, given || undefined);
  // The secret is on this answer only: the page does not show it again.
  ctx.res.setHeader('cache-control', 'no-store');
  return settingsPage(
    ctx,
    repo,
    html`<div role="status" class="notice">
      <p>Webhook added. Its secret is shown this once: keep it where the receiver checks signatures.</p>
      ${copyField('Secret', hook.secret)}
    </div>`,
  );
}

/** The webhook a form's address names, of the reader's own repository (404 when it has none such). */
async function ownHook(ctx: RouteContext): Promise<{ repo: RepoTarget; hook: WebhookView }> {
  const repo = await ownRepo(ctx);
  const hook = await ctx.site.index.webhooks.get(repo.did, repo.name, ctx.params['id'] ?? '');
  if (hook === undefined) throw new HttpError(404, 'This repository has no such webhook.');
  return { repo, hook };
}

function back(res: http.ServerResponse, repo: RepoTarget): undefined {
  seeOther(res, settingsHref(repo));
  return undefined;
}

function post(path: string, handle: (ctx: RouteContext) => Promise<string | undefined>): Route {
  return {
    method: 'POST',
    path: `/:owner/:repo/settings/webhooks${path}`,
    answers: 'html',
    signIn: SIGN_IN,
    csrf: true,
    form: MAX_FORM_BYTES,
    handle,
  };
}

export const webhookRoutes: Route[] = [
  {
    method: 'GET',
    path: '/:owner/:repo/settings/webhooks',
    answers: 'html',
    signIn: SIGN_IN,
    handle: async (ctx) => settingsPage(ctx, await ownRepo(ctx)),
  },
  post('', add),
  post('/:id/test', async (ctx) => {
    const { repo, hook } = await ownHook(ctx);
    await ctx.site.index.webhooks.ping(hook);
    ctx.site.webhooks?.wake();
    return back(ctx.res, repo);
  }),
  post('/:id/redeliver', async (ctx) => {
    const { repo, hook } = await ownHook(ctx);
    if (!(await ctx.site.index.webhooks.redeliver(hook.id, ctx.form.get('delivery') ?? '')))
      throw new HttpError(404, 'This webhook has no such delivery.');
    ctx.site.webhooks?.wake();
    return back(ctx.res, repo);
  }),
  post('/:id/remove', async (ctx) => {
    const { repo, hook } = await ownHook(ctx);
    await ctx.site.index.webhooks.remove(repo.did, repo.name, hook.id);
    return back(ctx.res, repo);
  }),
];
