// The one Atom writer (RFC 4287) the appview's feeds use: a repository's commits and a reader's
// notifications. Every text goes through one escape, with the characters XML 1.0 has no place for
// (most controls, which a commit message may hold) replaced, so no feed is malformed by its content.
import { escapeHtml } from './html.ts';

// eslint-disable-next-line no-control-regex -- these are exactly the characters to replace
const NOT_XML = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g;

/** Text as it may stand in XML: escaped, and its characters XML cannot hold replaced. */
export function xmlText(text: string): string {
  return escapeHtml(text.replace(NOT_XML, '\ufffd'));
}

export interface AtomEntry {
  id: string;
  title: string;
  link: string;
  /** An ISO 8601 time. */
  updated: string;
  author: string;
  content: string;
}

export interface AtomFeed {
  id: string;
  title: string;
  link: string;
  /** An ISO 8601 time: the newest entry's, or the epoch for an empty feed. */
  updated: string;
  entries: AtomEntry[];
}

/** The feed's document. */
export function atomXml(feed: AtomFeed): string {
  const x = xmlText;
  const entries = feed.entries.map(
    (e) =>
      `<entry><id>${x(e.id)}</id><title>${x(e.title)}</title><link href="${x(e.link)}"/>` +
      `<updated>${x(e.updated)}</updated><author><name>${x(e.author)}</name></author>` +
      `<content type="text">${x(e.content)}</content></entry>`,
  );
  return (
    '<?xml version="1.0" encoding="utf-8"?>\n' +
    `<feed xmlns="http://www.w3.org/2005/Atom"><id>${x(feed.id)}</id><title>${x(feed.title)}</title>` +
    `<link href="${x(feed.link)}"/><updated>${x(feed.updated)}</updated>${entries.join('')}</feed>\n`
  );
}
