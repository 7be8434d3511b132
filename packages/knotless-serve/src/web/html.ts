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

/** Escapes text for HTML content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
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

/** A URL path from segments, each percent-encoded (slashes inside a segment included). */
export function href(...segments: string[]): string {
  return '/' + segments.map(encodeURIComponent).join('/');
}

/** A URL path from segments where the last may hold slashes (a file path or a ref name). */
export function pathHref(prefix: string[], rest: string): string {
  const tail = rest === '' ? '' : '/' + rest.split('/').map(encodeURIComponent).join('/');
  return href(...prefix) + tail;
}

/** The whole page around `body`. */
export function page(title: string, body: SafeHtml, opts: { q?: string } = {}): string {
  return (
    '<!doctype html>' +
    html`<html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${title} · knotless</title>
        <link rel="stylesheet" href="/static/style.css" />
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
        </header>
        <main>${body}</main>
        <footer>Rebuilt from the network: every repository here lives in its owner's account.</footer>
      </body>
    </html>`.value
  );
}

/** A short, human date from an ISO timestamp. */
export function when(iso: string | null | undefined): SafeHtml {
  if (iso === null || iso === undefined || iso === '') return html``;
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return html``;
  return html`<time datetime="${d.toISOString()}">${d.toISOString().slice(0, 16).replace('T', ' ')}</time>`;
}
