// A write whose sign-in no longer holds (the account moved to another PDS, or the PDS revoked or
// expired the tokens): the browser session here ends, and the answer says why in one sentence,
// links to signing in again, and shows what the reader typed so none of it is lost.
import type http from 'node:http';
import { sessionCookie } from '../../auth/web-sessions.ts';
import { html, type SafeHtml } from '../html.ts';
import { HttpError, type Site } from '../site.ts';
import type { Form } from './forge-env.ts';

/** The text fields a form may carry, in the order shown, with their labels. */
function typedFields(form: Form, action: string): { name: string; label: string; value: string }[] {
  const labels: Record<string, string> = {
    title: 'Title',
    body: /comment$/.test(action) ? 'Comment' : 'Description',
    labels: 'Labels',
    message: 'Commit message',
    // An edited file's text, labelled with its path as the editor labels it.
    content: form.get('path') ?? 'Content',
  };
  return Object.entries(labels).flatMap(([name, label]) => {
    const value = form.get(name);
    return value === null || value === '' ? [] : [{ name, label, value }];
  });
}

/** The page: the sentence, the sign-in link, and the typed text in fields to copy from. */
function lapsedBody(sentence: string, form: Form, action: string): SafeHtml {
  const fields = typedFields(form, action);
  return html`<h1>Signed out</h1>
    <p class="error" role="alert">${sentence}</p>
    <p>
      <a class="u" href="/-/signin" target="_blank" rel="noopener">Sign in again</a>
      ${fields.length === 0 ? '' : '(in a new tab: what you typed stays below, to post again from there).'}
    </p>
    ${
      fields.length === 0
        ? ''
        : html`<section class="box" aria-label="What you typed">
            <div class="pad stack">
              ${fields.map((f) =>
                f.name === 'title' || f.name === 'labels'
                  ? html`<label for="kept-${f.name}">${f.label}</label>
                      <input id="kept-${f.name}" value="${f.value}" />`
                  : // HTML drops a line break right after <textarea>: one goes first, so the text's own is kept.
                    html`<label for="kept-${f.name}">${f.label}</label>
                      <textarea id="kept-${f.name}" rows="6">${'\n'}${f.value}</textarea>`,
              )}
            </div>
          </section>`
    }`;
}

/**
 * The 401 for a form posted to `action` whose sign-in no longer holds (`sentence`, the core's
 * session-expired refusal): the browser's session cookie is cleared with it, so the header stops
 * claiming a sign-in.
 */
export function signInLapsed(
  site: Site,
  res: http.ServerResponse,
  form: Form,
  action: string,
  sentence: string,
): HttpError {
  res.setHeader('set-cookie', sessionCookie('', site.secure));
  return new HttpError(401, sentence, lapsedBody(sentence, form, action));
}
