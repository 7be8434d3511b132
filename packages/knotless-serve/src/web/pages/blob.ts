import fs from 'node:fs';
import type http from 'node:http';
import { pipeline } from 'node:stream/promises';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { isKnotlessError } from 'knotless-core/errors';
import { downloadLfsObject } from 'knotless-core/ops/lfs';
import { parseLfsPointer } from 'knotless-core/records/lfs-record';
import type { Identity } from 'knotless-core/identity/resolver';
import { RemoteRepo } from 'knotless-core/records/remote-repo';
import { pathType, readBlob } from '../../mirror/read.ts';
import { html, humanSize, page, pathHref } from '../html.ts';
import { renderCode } from '../render.ts';
import { viewer } from '../viewer.ts';
import { HttpError, Redirect, type Site, type RepoTarget } from '../site.ts';
import { crumbs, refPath, repoHeader } from './common.ts';
import { decidesFor } from './forge-forms.ts';

/** Largest file shown in a page; bigger ones only raw. */
const MAX_SHOWN = 1024 * 1024;
/**
 * Most lines shown in a page: the limit above counts source bytes, but a page costs per line (numbers,
 * markup), so a megabyte of one-character lines would make a page of tens of megabytes.
 */
export const MAX_LINES = 20_000;
/** Largest file served raw (the mirror is read whole into memory). */
const MAX_RAW = 64 * 1024 * 1024;

/** The number of lines in `b` (a last line without a newline counts). */
export function lineCount(b: Buffer): number {
  let n = 0;
  for (let i = b.indexOf(10); i !== -1; i = b.indexOf(10, i + 1)) n++;
  return b.length > 0 && b[b.length - 1] !== 10 ? n + 1 : n;
}

function isBinary(b: Buffer): boolean {
  return b.subarray(0, 8000).includes(0);
}

/** A file at a ref, highlighted, with a link to its raw bytes. */
export async function blobPage(_site: Site, repo: RepoTarget, tail: string): Promise<string> {
  const at = await refPath(repo, tail);
  const type = await pathType(repo.gitDir, at.oid, at.path);
  // README links name directories too (`docs/`); they land on the directory's page.
  if (type === 'tree') throw new Redirect(pathHref([repo.owner, repo.name, 'tree'], tail));
  if (type !== 'blob') throw new HttpError(404, `No file ${at.path} at ${at.ref}.`);
  const blob = await readBlob(repo.gitDir, at.oid, at.path, MAX_SHOWN);
  const base = [repo.owner, repo.name];
  const at2 = `${at.ref}/${at.path}`;
  // Counted once, for the limit and the sentence.
  const lines = blob.content === undefined ? 0 : lineCount(blob.content);
  // A Git LFS pointer stands for its object: shown as such, its size the object's, served raw.
  const lfs = blob.content === undefined ? undefined : parseLfsPointer(blob.content);
  const body =
    lfs !== undefined
      ? html`<p class="pad muted">Stored with Git LFS (${humanSize(lfs.size)}); Raw downloads it.</p>`
      : blob.content === undefined
        ? html`<p class="pad muted">This file is too large to show (${humanSize(blob.size)}).</p>`
        : isBinary(blob.content)
          ? html`<p class="pad muted">Binary file (${humanSize(blob.size)}).</p>`
          : lines > MAX_LINES
            ? html`<p class="pad muted">This file has ${lines} lines, too many to show here; see it raw.</p>`
            : renderCode(at.path, blob.content.toString('utf8'));
  return page(
    `${at.path} at ${at.ref}`,
    html`${repoHeader(repo, at.ref)}${crumbs(repo, at.ref, at.path)}
      <div class="box">
        <div class="head bar">
          <span class="mono">${at.path.split('/').pop()}</span>
          <span class="muted"
            >${humanSize(lfs?.size ?? blob.size)}${lfs === undefined ? '' : ' (Git LFS)'}</span
          >
          <span class="grow"></span>
          <a href="${pathHref([...base, 'raw'], at2)}">Raw</a>
          <a href="${pathHref([...base, 'blame'], at2)}">Blame</a>
          <a href="${pathHref([...base, 'history'], at2)}">History</a>
          ${decidesFor(repo, viewer()?.did) ? html`<a href="${pathHref([...base, 'edit'], at2)}">Edit</a>` : ''}
        </div>
        ${body}
      </div>`,
  );
}

/**
 * Image types raw files are served as, by extension, when their first bytes agree (so that a README
 * can show the repository's own pictures). SVG is allowed for the same reason as in the image proxy:
 * the answer is sandboxed, so no script in it ever runs, even opened on its own.
 */
const IMAGES: Record<string, { type: string; magic: (b: Buffer) => boolean }> = {
  png: { type: 'image/png', magic: (b) => b.subarray(0, 8).equals(Buffer.from('89504e470d0a1a0a', 'hex')) },
  jpg: { type: 'image/jpeg', magic: (b) => b.subarray(0, 3).equals(Buffer.from('ffd8ff', 'hex')) },
  jpeg: { type: 'image/jpeg', magic: (b) => b.subarray(0, 3).equals(Buffer.from('ffd8ff', 'hex')) },
  gif: { type: 'image/gif', magic: (b) => b.subarray(0, 4).toString('latin1') === 'GIF8' },
  webp: {
    type: 'image/webp',
    magic: (b) =>
      b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WEBP',
  },
  svg: { type: 'image/svg+xml', magic: (b) => !isBinary(b) },
};

function contentType(path: string, content: Buffer): string {
  const ext = /\.([a-z]+)$/i.exec(path)?.[1]?.toLowerCase();
  const image = ext === undefined ? undefined : IMAGES[ext];
  if (image?.magic(content) === true) return image.type;
  return isBinary(content) ? 'application/octet-stream' : 'text/plain; charset=utf-8';
}

/**
 * A file's bytes as plain text (never HTML, whatever it holds), an image, or a download. A Git LFS
 * pointer is answered with its object, read from the owner's PDS (public repositories only).
 */
export async function rawBlob(
  site: Site,
  repo: RepoTarget,
  tail: string,
  res: http.ServerResponse,
): Promise<void> {
  const at = await refPath(repo, tail);
  if ((await pathType(repo.gitDir, at.oid, at.path)) !== 'blob')
    throw new HttpError(404, `No file ${at.path} at ${at.ref}.`);
  const blob = await readBlob(repo.gitDir, at.oid, at.path, MAX_RAW);
  if (blob.content === undefined)
    throw new HttpError(413, 'This file is too large to serve here; clone the repository.');
  const lfs = parseLfsPointer(blob.content);
  if (lfs !== undefined) return rawLfs(site, repo, lfs, at.path, res);
  if (res.headersSent) return;
  res
    .writeHead(200, {
      'content-type': contentType(at.path, blob.content),
      'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; sandbox",
      'x-content-type-options': 'nosniff',
    })
    .end(blob.content);
}

/** A Git LFS object, fetched from the owner's PDS (each blob and the whole checked) and streamed. */
async function rawLfs(
  site: Site,
  repo: RepoTarget,
  object: { oid: string; size: number },
  name: string,
  res: http.ServerResponse,
): Promise<void> {
  // A private repository's objects are encrypted for its members; the appview holds no key.
  if (repo.private)
    throw new HttpError(404, 'This file is stored with Git LFS in a private repository; clone it.');
  if (object.size > MAX_RAW)
    throw new HttpError(
      413,
      'This Git LFS file is too large to serve here; clone the repository and git lfs pull.',
    );
  const owner = await site.identities.owner(repo.did);
  if (owner.pds === null) throw new HttpError(502, 'That account has no PDS the appview can reach.');
  const identity = {
    did: owner.did,
    pds: owner.pds,
    ...(owner.handle === null ? {} : { handle: owner.handle }),
  } as Identity;
  const client = site.forge.client(owner.pds);
  const remote = new RemoteRepo({ reader: client, writer: () => client }, identity, repo.name, (m) =>
    site.log(m),
  );
  const cacheDir = site.forge.config.cacheDir;
  const cache = new BlobCache(cacheDir);
  let file: string;
  try {
    file = await downloadLfsObject(
      remote,
      { cache, cacheDir, say: (m) => site.log(m) },
      object,
      cache.tempDir,
      () => {},
    );
  } catch (err) {
    if (isKnotlessError(err, 'not-found'))
      throw new HttpError(404, 'This Git LFS file is not stored in the PDS.');
    if (isKnotlessError(err)) throw new HttpError(502, err.message);
    throw err;
  }
  try {
    if (res.headersSent) return;
    const head = Buffer.alloc(Math.min(8000, object.size));
    const fd = fs.openSync(file, 'r');
    try {
      fs.readSync(fd, head, 0, head.length, 0);
    } finally {
      fs.closeSync(fd);
    }
    res.writeHead(200, {
      'content-type': contentType(name, head),
      'content-length': String(object.size),
      'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; sandbox",
      'x-content-type-options': 'nosniff',
    });
    await pipeline(fs.createReadStream(file), res);
  } finally {
    fs.rmSync(file, { force: true });
  }
}
