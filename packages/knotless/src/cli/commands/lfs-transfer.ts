import fs from 'node:fs';
import path from 'node:path';
import { activeSession } from '../../auth/login.ts';
import type { SessionAuthorizer } from '../../auth/store.ts';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { KnotlessError, isKnotlessError } from 'knotless-core/errors';
import { GitError, gitText } from 'knotless-core/git/run';
import {
  LFS_BLOB_NOTICE,
  downloadLfsObject,
  lfsBlobsNeeded,
  uploadLfsObject,
  type LfsEnv,
} from 'knotless-core/ops/lfs';
import { parseKnotlessUrl } from 'knotless-core/records/knotless-url';
import { isLfsOid } from 'knotless-core/records/lfs-record';
import type { RemoteRepo } from 'knotless-core/records/remote-repo';
import { readLineSync, writeAllSync } from 'knotless-core/text/fd-io';
import { safeText } from 'knotless-core/text/terminal';
import type { Context } from '../../context.ts';
import type { Command } from '../command.ts';
import type { Io } from '../io.ts';

// git-lfs's custom transfer protocol (git-lfs's docs/custom-transfers.md): one JSON message a line
// each way, `init`, then `upload` or `download` requests one at a time, each answered by `progress`
// messages and one `complete`, then `terminate`. No library speaks it, so it is written out here.

/** A request from git-lfs, as far as it is read. */
interface Request {
  event?: unknown;
  operation?: unknown;
  remote?: unknown;
  oid?: unknown;
  size?: unknown;
  path?: unknown;
}

/** A transfer error's code in git-lfs's answer (git-lfs prints the message; the code is ours). */
const TRANSFER_FAILED = 2;

export const command: Command = {
  name: 'lfs transfer',
  args: '',
  summary:
    "git-lfs's transfer agent for knotless remotes (git-lfs runs it; `knotless lfs install` sets it up)",
  details: [
    "Speaks git-lfs's custom transfer protocol on stdin and stdout: each LFS object is stored as blobs of the repository owner's PDS, listed by a dev.knotless.lfs record (docs/reference/format.md).",
  ],
  positionals: { min: 0, max: 0 },
  async run({ ctx, io }) {
    const send = (message: object) => writeAllSync(1, JSON.stringify(message) + '\n');
    const init = readRequest();
    if (init?.event !== 'init') {
      throw new KnotlessError(
        'usage',
        'git-lfs runs `knotless lfs transfer`; set it up with `knotless lfs install`.',
      );
    }
    let session: Session;
    try {
      session = await open(ctx(), io, init);
    } catch (err) {
      send({ error: { code: 32, message: messageOf(err) } });
      return;
    }
    send({});
    for (;;) {
      const req = readRequest();
      if (req === undefined || req.event === 'terminate') return;
      const oid = req.oid;
      if (!isLfsOid(oid) || !Number.isSafeInteger(req.size) || (req.size as number) < 0) {
        send({
          event: 'complete',
          oid: String(oid),
          error: { code: TRANSFER_FAILED, message: 'not an LFS object' },
        });
        continue;
      }
      let soFar = 0;
      const progress = (n: number) => {
        soFar += n;
        send({ event: 'progress', oid, bytesSoFar: soFar, bytesSinceLast: n });
      };
      try {
        const size = req.size as number;
        if (req.event === 'upload' && typeof req.path === 'string') {
          await session.upload({ oid, size, file: req.path }, progress);
          send({ event: 'complete', oid });
        } else if (req.event === 'download') {
          const file = await session.download({ oid, size }, progress);
          send({ event: 'complete', oid, path: file });
        } else {
          send({ event: 'complete', oid, error: { code: TRANSFER_FAILED, message: 'unknown request' } });
        }
      } catch (err) {
        // One object's failure is its answer; git-lfs goes on with the others and reports it.
        send({ event: 'complete', oid, error: { code: TRANSFER_FAILED, message: messageOf(err) } });
      }
    }
  },
};

/** The next request, or undefined when git-lfs closed our stdin. */
function readRequest(): Request | undefined {
  const line = readLineSync(0);
  if (line === '') return undefined;
  try {
    const parsed: unknown = JSON.parse(line);
    return typeof parsed === 'object' && parsed !== null ? parsed : {};
  } catch (err) {
    if (!(err instanceof SyntaxError)) throw err;
    return {};
  }
}

/** A failure as one sentence for git-lfs to print; a bug still says it is one. */
function messageOf(err: unknown): string {
  if (isKnotlessError(err)) return `knotless: ${err.message}`;
  throw err;
}

interface Session {
  upload(object: { oid: string; size: number; file: string }, onBytes: (n: number) => void): Promise<void>;
  download(object: { oid: string; size: number }, onBytes: (n: number) => void): Promise<string>;
}

/** The remote git-lfs named: a knotless:// URL, or a remote whose URL is one. */
async function remoteUrl(remote: unknown): Promise<string> {
  if (typeof remote !== 'string' || remote === '')
    throw new KnotlessError('usage', 'git-lfs named no remote; run `git lfs push <remote>`.');
  if (remote.startsWith('knotless://')) return remote;
  let url: string;
  try {
    url = (await gitText(['config', '--get', `remote.${remote}.url`])).trim();
  } catch (err) {
    if (!(err instanceof GitError)) throw err;
    throw new KnotlessError('usage', `The remote ${safeText(remote)} has no URL; name a knotless remote.`, {
      cause: err,
    });
  }
  if (!url.startsWith('knotless://'))
    throw new KnotlessError(
      'invalid-url',
      `The remote ${safeText(remote)} is not a knotless:// remote; knotless's LFS transfer agent serves knotless remotes only.`,
    );
  return url;
}

/** Where a download's file goes: git-lfs's own temporary folder, so that it moves it, not copies it. */
async function downloadDir(fallback: string): Promise<string> {
  try {
    const dir = path.resolve((await gitText(['rev-parse', '--git-path', 'lfs/tmp'])).trim());
    fs.mkdirSync(dir, { recursive: true });
    return dir;
  } catch (err) {
    if (!(err instanceof GitError)) throw err;
    return fallback;
  }
}

async function open(ctx: Context, io: Io, init: Request): Promise<Session> {
  const url = parseKnotlessUrl(await remoteUrl(init.remote));
  const owner = await ctx.resolver.resolve(url.owner);
  const remote: RemoteRepo = ctx.remoteRepo(owner, url.repo, (m) => io.err(`knotless: warning: ${m}`));
  const cache = new BlobCache(ctx.config.cacheDir);
  // Said once for the whole transfer (git-lfs runs one for a push's objects): the budget is the PDS's,
  // the same for every object, and the first object it falls short for says so.
  let saidBudget = false;
  const env: LfsEnv = {
    cache,
    cacheDir: ctx.config.cacheDir,
    say: (line) => io.err(line),
    sayBudget: (line) => {
      if (saidBudget) return;
      saidBudget = true;
      tellPusher(io, line);
    },
  };
  let auth: SessionAuthorizer | undefined;
  return {
    async upload(object, onBytes) {
      auth ??= await activeSession(ctx);
      if (auth.session.did !== owner.did)
        throw new KnotlessError(
          'permission-denied',
          `Only ${safeText(owner.handle ?? owner.did)} can push LFS objects to ${remote.label}; you are ${safeText(auth.session.handle)}.`,
        );
      const blobs = await lfsBlobsNeeded(remote, auth, env, object.size);
      if (blobs > LFS_BLOB_NOTICE)
        tellPusher(
          io,
          `knotless: LFS object ${object.oid.slice(0, 12)} (${object.size} bytes) needs ${blobs} blob uploads.`,
        );
      await uploadLfsObject(remote, auth, env, object, onBytes);
    },
    async download(object, onBytes) {
      return downloadLfsObject(remote, env, object, await downloadDir(cache.tempDir), onBytes);
    },
  };
}

/**
 * Says `line` to whoever runs the push. git-lfs sends its transfer agent's stderr to its trace only
 * (seen with GIT_TRACE=1), so a line there is lost in a plain `git push`; git-lfs's own stderr is the
 * push's. So the line goes there: on Linux, git-lfs is found among this process's parents (it may run
 * the agent through `sh -c`) and its stderr opened through /proc, when it is a terminal or a pipe (a
 * file opened without O_APPEND would have the line overwritten by git's next write). Anywhere else,
 * or when it cannot be opened (another user's process, a socket), the trace is where it goes.
 * Nothing of this runs unless an object to upload needs that many blobs, or more than the PDS says
 * are left: a push without LFS objects never starts this process at all.
 */
function tellPusher(io: Io, line: string): void {
  const fd = pushersStderr();
  if (fd === undefined) return io.err(line);
  try {
    writeAllSync(fd, `${line}\n`);
  } finally {
    fs.closeSync(fd);
  }
}

/** The nearest git-lfs parent's stderr, opened for writing; undefined when there is none to use. */
function pushersStderr(): number | undefined {
  if (process.platform !== 'linux') return undefined;
  let pid = process.ppid;
  // git-lfs, or the shell it ran the agent through, then git-lfs: a few parents at most.
  for (let depth = 0; depth < 4 && pid > 1; depth++) {
    let fd: number | undefined;
    try {
      if (fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'git-lfs') {
        fd = fs.openSync(`/proc/${pid}/fd/2`, 'a');
        const theirs = fs.fstatSync(fd);
        const ours = fs.fstatSync(2);
        const same = theirs.dev === ours.dev && theirs.ino === ours.ino;
        if (same || !(theirs.isFIFO() || theirs.isCharacterDevice())) {
          fs.closeSync(fd);
          return undefined;
        }
        return fd;
      }
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      // After the command's name in parentheses: the state, then the parent's pid.
      pid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    } catch (err) {
      // A parent gone, or not ours to open: the trace it is.
      if (typeof (err as NodeJS.ErrnoException).code !== 'string') throw err;
      if (fd !== undefined) fs.closeSync(fd);
      return undefined;
    }
  }
  return undefined;
}
