/** HTML that is already safe to emit: built by {@link html} or by a trusted renderer. */
export class SafeHtml {
  readonly value: string;
  constructor(value: string) {
    this.value = value;
  }
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/**
 * Control characters other than HTML's whitespace, and the bidirectional embeddings, overrides and
 * isolates: a commit message, ref name, file or record may hold them, HTML has no use for the
 * first (a page read with curl would hand them to a terminal), and the others reorder the text
 * around them on the page (a title that reads differently from what it says, "Trojan source").
 */
// eslint-disable-next-line no-control-regex -- these are exactly the characters to replace
const UNSAFE = /[\u0000-\u0008\u000b\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/** Text with the characters {@link UNSAFE} names shown as U+FFFD. */
export function withoutUnsafe(text: string): string {
  return text.replace(UNSAFE, '\ufffd');
}

/** Escapes text for HTML content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return withoutUnsafe(text).replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

type Part = SafeHtml | string | number | null | undefined | false | Part[];

function render(part: Part): string {
  if (part === null || part === undefined || part === false) return '';
  if (Array.isArray(part)) return part.map(render).join('');
  if (part instanceof SafeHtml) return part.value;
  return escapeHtml(String(part));
}

/**
 * A template tag that escapes every interpolated value unless it is SafeHtml, so a page cannot
 * forget to escape: the only way to emit markup is to build it with this tag.
 */
export function html(strings: TemplateStringsArray, ...values: Part[]): SafeHtml {
  let out = strings[0]!;
  values.forEach((v, i) => (out += render(v) + strings[i + 1]!));
  return new SafeHtml(out);
}

/** Marks output of a sanitising renderer (markdown-it without HTML, highlight.js) as safe. */
export function trusted(markup: string): SafeHtml {
  return new SafeHtml(markup);
}

import { utcTime } from 'knotless-core';
import { signInOffered, unseen, viewer } from './viewer.ts';

/** A URL path from segments, each percent-encoded (slashes inside a segment included). */
export function href(...segments: string[]): string {
  return '/' + segments.map(encodeURIComponent).join('/');
}

/** A URL path from segments where the last may hold slashes (a file path or a ref name). */
export function pathHref(prefix: string[], rest: string): string {
  const tail = rest === '' ? '' : '/' + rest.split('/').map(encodeURIComponent).join('/');
  return href(...prefix) + tail;
}

export interface PageOptions {
  q?: string;
  /** OpenGraph description (link previews); the title is the page's own. */
  description?: string;
  /** An Atom feed to announce in the head. */
  feed?: string;
}

/** The whole page around `body`. */
export function page(title: string, body: SafeHtml, opts: PageOptions = {}): string {
  return (
    '<!doctype html>' +
    html`<html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${title} · knotless</title>
        <meta property="og:title" content="${title}" />
        <meta property="og:type" content="website" />
        <meta property="og:site_name" content="knotless" />
        ${
          opts.description === undefined
            ? ''
            : html`<meta name="description" content="${opts.description}" />
                <meta property="og:description" content="${opts.description}" />`
        }
        ${
          opts.feed === undefined
            ? ''
            : html`<link rel="alternate" type="application/atom+xml" title="Commits" href="${opts.feed}" />`
        }
        <link rel="stylesheet" href="/static/style.css" />
        <script src="/static/app.js" defer></script>
      </head>
      <body>
        <header class="top">
          <a class="brand" href="/">knotless</a>
          <form class="search" action="/" method="get">
            <input
              type="search"
              name="q"
              placeholder="Search repositories"
              value="${opts.q ?? ''}"
              aria-label="Search repositories"
            />
          </form>
          ${accountNav()}
        </header>
        <main>${body}</main>
        <footer>Rebuilt from the network: every repository here lives in its owner's account.</footer>
      </body>
    </html>`.value
  );
}

/** A time from an ISO timestamp, its zone named (UTC), as the CLI shows it (knotless-core's utcTime). */
export function when(iso: string | null | undefined): SafeHtml {
  const shown = utcTime(iso);
  if (shown === undefined) return html``;
  return html`<time datetime="${new Date(iso!).toISOString()}">${shown}</time>`;
}

/** A byte count as people read it: 812 B, 12.4 KiB, 3.1 MiB. */
export function humanSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let n = bytes / 1024;
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n >= 100 ? Math.round(n) : n.toFixed(1)} ${units[i]!}`;
}

/** A read-only field holding `text`, with a button that copies it (static/app.js). */
export function copyField(label: string, text: string): SafeHtml {
  return html`<label class="copyrow"
    ><span>${label}</span
    ><span class="copyline"
      ><input readonly value="${text}" aria-label="${label}" /><button type="button" data-copy="${text}">
        Copy
      </button></span
    ></label
  >`;
}

/** The header's account part: who is signed in and a sign-out button, or a sign-in link. */
function accountNav(): SafeHtml {
  const v = viewer();
  if (v === undefined) return signInOffered() ? html`<a class="signin" href="/-/signin">Sign in</a>` : html``;
  return html`<span class="signedin"
    ><a class="u" href="/-/notifications"
      >Notifications${unseen() === 0 ? '' : html` <span class="pill">${String(unseen())}</span>`}</a
    >
    Signed in as <a class="u" href="/${encodeURIComponent(v.handle)}">${v.handle}</a>
    <form class="inline" method="post" action="/-/signout">
      <input type="hidden" name="csrf" value="${v.csrf}" /><button type="submit">Sign out</button>
    </form></span
  >`;
}

/** HTML response headers: no scripts, no framing, no sniffing, whatever a page contains. */
export const HTML_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy':
    // Scripts and styles only from files here, never inline: a page cannot carry a script even if
    // escaping failed somewhere. Images only from here: README images from other hosts come through /-/img/ (src/web/images.ts),
    // so a reader's browser never contacts a host a README names.
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};
