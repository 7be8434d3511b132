// What every form of the signed-in reader carries: the CSRF token (checked by web/actions/).
import { html, type SafeHtml } from './html.ts';
import { viewer } from './viewer.ts';

/** The hidden field every form carries: the session's CSRF token. */
export function csrfField(): SafeHtml {
  const v = viewer();
  return v === undefined ? html`` : html`<input type="hidden" name="csrf" value="${v.csrf}" />`;
}

/** A form posting to `action` with the CSRF token, hidden `fields` and one button. */
export function postButton(action: string, label: string, fields: Record<string, string> = {}): SafeHtml {
  return html`<form class="inline" method="post" action="${action}">
    ${csrfField()}${Object.entries(fields).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}" />`)}
    <button type="submit">${label}</button>
  </form>`;
}
