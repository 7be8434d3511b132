import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { safeText } from 'knotless-core';
import { AddressRefused, checkUrl, guardedAgents } from '../net/guard.ts';
import { HttpError } from './http-error.ts';

/**
 * Image types passed through. SVG is included because most README badges are SVG; it is safe here
 * because every answer carries `Content-Security-Policy: sandbox` (no script runs even when the
 * image is opened on its own) and nosniff, and inside an <img> browsers never run SVG scripts.
 */
const IMAGE_TYPES = new Set([
  'image/png',
  'image/jpeg',
  'image/gif',
  'image/webp',
  'image/avif',
  'image/svg+xml',
  'image/x-icon',
  'image/vnd.microsoft.icon',
]);

/** Redirects followed per image (each hop goes through the address guard again). */
const MAX_REDIRECTS = 3;
/** Bytes of answers kept in memory, and for how long: popular badges are asked for on every page view. */
const CACHE_BYTES = 32 * 1024 * 1024;
const CACHE_MS = 10 * 60 * 1000;

interface Cached {
  type: string;
  body: Buffer;
  at: number;
}

/** Settings of the image proxy. */
export interface ImageProxyOptions {
  /** The HMAC key that signs image addresses, so the proxy fetches only what a page of ours named. */
  key: Buffer;
  /** Dev mode: the address guard is off, as it is for PDSes. */
  dev: boolean;
  maxBytes: number;
  timeoutMs: number;
  /** Hears a failure that is not the image's host refusing or failing us (the appview's log). */
  log: (line: string) => void;
}

/**
 * README images from other hosts, fetched by the appview and served from its own origin, so that
 * a reader's browser never contacts (and never gives its IP address to) a host a README names.
 * Addresses are `/-/img/<hmac>/<base64url of the URL>`: only URLs this appview put in a page are
 * fetched, so it is not an open proxy. Fetches go through the same address guard as PDS reads, take
 * http(s) only, accept only image types, and are cut at a size and a time limit.
 */
export class ImageProxy {
  readonly #opts: ImageProxyOptions;
  readonly #agents: ReturnType<typeof guardedAgents>;
  readonly #cache = new Map<string, Cached>();
  #cachedBytes = 0;

  constructor(opts: ImageProxyOptions) {
    this.#opts = opts;
    this.#agents = guardedAgents(opts.dev);
  }

  /** The local address that serves the image at `remote` (an absolute http(s) URL). */
  url(remote: string): string {
    return `/-/img/${this.#sign(remote)}/${Buffer.from(remote, 'utf8').toString('base64url')}`;
  }

  #sign(remote: string): string {
    return crypto.createHmac('sha256', this.#opts.key).update(remote, 'utf8').digest('base64url');
  }

  /** Answers `/-/img/<rest>`: the image, or an error status with a short text. */
  async serve(rest: string, res: http.ServerResponse, signal: AbortSignal | undefined): Promise<void> {
    const [sig, encoded, ...extra] = rest.split('/');
    if (sig === undefined || encoded === undefined || extra.length > 0)
      throw new HttpError(404, 'No such image.');
    const remote = Buffer.from(encoded, 'base64url').toString('utf8');
    const want = Buffer.from(this.#sign(remote));
    const got = Buffer.from(sig);
    if (got.length !== want.length || !crypto.timingSafeEqual(got, want))
      throw new HttpError(403, 'This image address was not made by this appview.');
    let image: Cached;
    try {
      image = this.#fromCache(remote) ?? (await this.#fetch(remote, signal));
    } catch (err) {
      if (signal?.aborted === true) throw err;
      // The reader gets a 502 whatever went wrong; what is not the host's doing is worth knowing.
      if (!(err instanceof ImageRefused) && !(err instanceof AddressRefused))
        this.#opts.log(`image ${remote}: ${String(err)}`);
      answer(res, 502, 'text/plain; charset=utf-8', `The image could not be shown: ${readerReason(err)}.\n`);
      return;
    }
    answer(res, 200, image.type, image.body);
  }

  #fromCache(remote: string): Cached | undefined {
    const hit = this.#cache.get(remote);
    if (hit === undefined || Date.now() - hit.at > CACHE_MS) return undefined;
    return hit;
  }

  #remember(remote: string, image: Cached): void {
    const old = this.#cache.get(remote);
    if (old !== undefined) this.#cachedBytes -= old.body.length;
    this.#cache.delete(remote);
    this.#cache.set(remote, image);
    this.#cachedBytes += image.body.length;
    // Oldest first: Map keeps insertion order.
    for (const [k, v] of this.#cache) {
      if (this.#cachedBytes <= CACHE_BYTES) break;
      this.#cache.delete(k);
      this.#cachedBytes -= v.body.length;
    }
  }

  async #fetch(remote: string, signal: AbortSignal | undefined): Promise<Cached> {
    const deadline = AbortSignal.timeout(this.#opts.timeoutMs);
    const stop = signal === undefined ? deadline : AbortSignal.any([deadline, signal]);
    let url = new URL(remote);
    for (let hop = 0; ; hop++) {
      checkUrl(url, this.#opts.dev);
      const r = await this.#get(url, stop, deadline);
      if (r.location === undefined) {
        const image = { type: r.type, body: r.body, at: Date.now() };
        this.#remember(remote, image);
        return image;
      }
      if (hop >= MAX_REDIRECTS) throw new ImageRefused('it redirects too many times');
      url = new URL(r.location, url);
    }
  }

  /** One GET: an image body, or where a redirect points. */
  #get(
    url: URL,
    stop: AbortSignal,
    deadline: AbortSignal,
  ): Promise<{ type: string; body: Buffer; location?: string }> {
    const { maxBytes, timeoutMs } = this.#opts;
    return new Promise((resolve, reject) => {
      const mod = url.protocol === 'https:' ? https : http;
      const req = mod.request(url, {
        method: 'GET',
        agent: this.#agents[url.protocol as 'http:' | 'https:'],
        headers: { accept: [...IMAGE_TYPES].join(', '), 'user-agent': 'knotless-serve image proxy' },
        signal: stop,
      });
      const fail = (err: Error): void => {
        req.destroy();
        reject(deadline.aborted ? new ImageRefused(`it took longer than ${timeoutMs} ms`) : err);
      };
      req.on('error', fail);
      req.on('response', (res) => {
        const status = res.statusCode ?? 0;
        const location = res.headers.location;
        if (status >= 300 && status < 400 && location !== undefined) {
          res.resume();
          return resolve({ type: '', body: Buffer.alloc(0), location });
        }
        if (status !== 200) return fail(new ImageRefused(`its host answered ${status}`));
        const type = (res.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
        if (!IMAGE_TYPES.has(type))
          return fail(new ImageRefused(`it is not an image (${safeText(type, 60) || 'no type'})`));
        const declared = Number(res.headers['content-length'] ?? '0');
        if (declared > maxBytes) return fail(new ImageRefused(`it is larger than ${maxBytes} bytes`));
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > maxBytes) fail(new ImageRefused(`it is larger than ${maxBytes} bytes`));
          else chunks.push(c);
        });
        res.on('error', fail);
        res.on('end', () => resolve({ type, body: Buffer.concat(chunks) }));
      });
      req.end();
    });
  }

  /** Closes idle connections. */
  close(): void {
    this.#agents['http:'].destroy();
    this.#agents['https:'].destroy();
  }
}

/** A reason an image is not shown that may be told to the reader. */
class ImageRefused extends Error {
  override name = 'ImageRefused';
}

/**
 * What the reader is told. Not the guard's or the socket's own words: they name the addresses a
 * host resolved to, and anyone who can push a README could read the appview's internal DNS that way.
 */
function readerReason(err: unknown): string {
  if (err instanceof ImageRefused) return err.message;
  if (err instanceof AddressRefused) return 'its host is not a public address';
  return 'its host could not be reached';
}

/** Headers that keep a proxied answer inert whatever it holds. */
function answer(res: http.ServerResponse, status: number, type: string, body: Buffer | string): void {
  if (res.headersSent) return;
  res
    .writeHead(status, {
      'content-type': type,
      'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; sandbox",
      'x-content-type-options': 'nosniff',
      'cache-control': status === 200 ? 'public, max-age=3600' : 'no-store',
      'cross-origin-resource-policy': 'same-origin',
    })
    .end(body);
}

/** The key image addresses are signed with: kept in the data directory, made on first start. */
export function imageKey(dataDir: string): Buffer {
  const file = path.join(dataDir, 'image-key');
  try {
    const key = fs.readFileSync(file);
    if (key.length >= 32) return key;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  fs.mkdirSync(dataDir, { recursive: true });
  const key = crypto.randomBytes(32);
  try {
    fs.writeFileSync(file, key, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    // Another appview on the same data directory made it first: use theirs.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return fs.readFileSync(file);
    throw err;
  }
  return key;
}
