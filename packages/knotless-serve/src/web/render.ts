import hljs from 'highlight.js/lib/common';
import MarkdownIt from 'markdown-it';
import { html, trusted, withoutUnsafe, type SafeHtml } from './html.ts';

// Raw HTML off: a README's <script>, <iframe> or onclick= is shown as text, never as markup.
// markdown-it's validateLink already refuses javascript:, vbscript:, file: and most data: URLs;
// ours keeps only http(s), mailto and relative links, so nothing else becomes an href or src.
const md = new MarkdownIt({ html: false, linkify: true, typographer: false });
md.validateLink = (url: string): boolean => {
  const u = url.trim().toLowerCase();
  const scheme = /^([a-z][a-z0-9+.-]*):/.exec(u)?.[1];
  return scheme === undefined || scheme === 'http' || scheme === 'https' || scheme === 'mailto';
};
const defaultLinkOpen = md.renderer.rules['link_open'];
md.renderer.rules['link_open'] = (tokens, idx, options, env, self) => {
  // Links in someone else's README: no referrer, no opener, marked as user content.
  tokens[idx]!.attrSet('rel', 'nofollow noopener noreferrer ugc');
  const images = (env as Partial<RenderEnv>).images;
  const target = String(tokens[idx]!.attrGet('href') ?? '');
  if (images?.link !== undefined && !target.startsWith('#')) {
    // A relative link names a file of the repository, as on forges: `COPYING` beside the README,
    // `/docs/x.md` from the root. It goes to that file's page at the shown ref, not to a path of
    // the appview (where `COPYING` would be /<owner>/COPYING, a 404).
    const file = repoFile(target, images.dir);
    if (file !== undefined) tokens[idx]!.attrSet('href', images.link(file.path) + file.hash);
  }
  return defaultLinkOpen
    ? defaultLinkOpen(tokens, idx, options, env, self)
    : self.renderToken(tokens, idx, options);
};

/** How a README's images are shown. */
export interface ImageSources {
  /** The local address of an image on another host (the appview's proxy). */
  remote(url: string): string;
  /** The address of a file of the repository, by its path from the root (its raw bytes). */
  local(path: string): string;
  /** The page of a file or directory of the repository, by its path from the root ('' is the root). */
  link?(path: string): string;
  /** The README's directory in the repository ('' at the root): relative paths start there. */
  dir: string;
}

interface RenderEnv {
  images?: ImageSources;
}

// Stands in for the page's own origin when telling a README's relative images from remote ones;
// `//host/x.png` and `/\host/x.png` are remote although they carry no scheme.
const LOCAL = 'https://appview.invalid/';

/** The repository path a relative link or image names, or undefined for another host. */
function repoFile(src: string, dir: string): { path: string; hash: string } | undefined {
  const base = dir === '' ? LOCAL : `${LOCAL}${dir}/`;
  // A README may link to anything; one that is not a URL at all names no file of the repository.
  if (!URL.canParse(src, base)) return undefined;
  const url = new URL(src, base);
  if (url.origin !== new URL(LOCAL).origin) return undefined;
  return { path: localPath(url).replace(/\/+$/, ''), hash: url.hash };
}

/** The repository path of a local URL, percent-decoded; a malformed escape is kept as written. */
function localPath(url: URL): string {
  const raw = url.pathname.slice(1);
  try {
    return decodeURIComponent(raw);
  } catch (err) {
    // URIError is decodeURIComponent's only failure: a stray `%` in the README's link, which then
    // names the file literally, as a forge would show it.
    if (err instanceof URIError) return raw;
    throw err;
  }
}

const defaultImage = md.renderer.rules['image']!;
md.renderer.rules['image'] = (tokens, idx, options, env, self) => {
  const images = (env as Partial<RenderEnv>).images;
  const token = tokens[idx]!;
  const src = String(token.attrGet('src') ?? '');
  const base = images === undefined || images.dir === '' ? LOCAL : `${LOCAL}${images.dir}/`;
  // An image whose source is not a URL is shown as its alt text.
  if (!URL.canParse(src, base))
    return md.utils.escapeHtml(self.renderInlineAsText(token.children ?? [], options, env));
  const url = new URL(src, base);
  if (url.origin !== new URL(LOCAL).origin) {
    // A remote image is never named in the page: the reader's browser would send its IP address to
    // whatever host the README chose. It goes through the proxy, or becomes a plain link.
    if (images === undefined) {
      const alt = self.renderInlineAsText(token.children ?? [], options, env) || url.href;
      return `<a href="${md.utils.escapeHtml(url.href)}" rel="nofollow noopener noreferrer ugc">${md.utils.escapeHtml(alt)}</a>`;
    }
    token.attrSet('src', images.remote(url.href));
  } else if (images !== undefined) {
    // A file of the repository: `x.png` beside the README, `/x.png` from the root, as on forges.
    token.attrSet('src', images.local(localPath(url)));
  }
  return defaultImage(tokens, idx, options, env, self);
};

/**
 * Markdown to HTML with raw HTML and unsafe link schemes disabled. Images from other hosts are
 * shown through `images` (the appview's proxy), or as links when it is not given.
 */
export function renderMarkdown(text: string, images?: ImageSources): SafeHtml {
  const env: Record<string, unknown> = images === undefined ? {} : { images };
  return trusted(md.render(withoutUnsafe(text), env));
}

/** Largest file highlighted; bigger ones are shown plain (highlighting is the slow part). */
const MAX_HIGHLIGHT = 256 * 1024;

/** The highlight.js language for a file name, if it knows one. */
function languageOf(name: string): string | undefined {
  const base = name.split('/').pop() ?? name;
  if (/^(Makefile|GNUmakefile)$/.test(base)) return 'makefile';
  if (base === 'Dockerfile') return 'dockerfile';
  const ext = /\.([A-Za-z0-9+]+)$/.exec(base)?.[1]?.toLowerCase();
  return ext !== undefined && hljs.getLanguage(ext) !== undefined ? ext : undefined;
}

/** A text file as numbered lines, highlighted when its language is known (highlight.js escapes). */
export function renderCode(name: string, raw: string): SafeHtml {
  const text = withoutUnsafe(raw);
  const lang = text.length <= MAX_HIGHLIGHT ? languageOf(name) : undefined;
  const body =
    lang === undefined ? undefined : hljs.highlight(text, { language: lang, ignoreIllegals: true }).value;
  // highlight.js closes its spans per token, but a token may span lines; splitting on newlines keeps
  // each row's spans balanced only for single-line tokens, so multi-line tokens are re-opened per row.
  const lines = body === undefined ? text.split('\n').map((l) => html`${l}`) : splitHighlighted(body);
  if (lines.length > 1 && text.endsWith('\n')) lines.pop();
  return html`<table class="code">
    ${lines.map(
      (l, i) =>
        html`<tr>
          <td class="n" id="L${i + 1}">${i + 1}</td>
          <td>${l}</td>
        </tr>`,
    )}
  </table>`;
}

/** Splits highlighted HTML into lines, closing and re-opening spans that cross a newline. */
function splitHighlighted(markup: string): SafeHtml[] {
  const out: SafeHtml[] = [];
  const open: string[] = [];
  let line = '';
  for (const part of markup.split(/(<span[^>]*>|<\/span>|\n)/)) {
    if (part === '\n') {
      out.push(trusted(line + '</span>'.repeat(open.length)));
      line = open.join('');
    } else if (part.startsWith('<span')) {
      open.push(part);
      line += part;
    } else if (part === '</span>') {
      open.pop();
      line += part;
    } else line += part;
  }
  out.push(trusted(line));
  return out;
}
