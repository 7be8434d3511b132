import fs from 'node:fs';
import path from 'node:path';
import { activeSession } from '../../auth/login.ts';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { KnotlessError } from 'knotless-core/errors';
import { GitError, runGit } from 'knotless-core/git/run';
import { LFS_BLOB_NOTICE, lfsBlobsNeeded, lfsUploadsLeft, type LfsEnv } from 'knotless-core/ops/lfs';
import { parseKnotlessUrl } from 'knotless-core/records/knotless-url';
import type { Command } from '../command.ts';

export const command: Command = {
  name: 'lfs pre-push',
  args: '<remote> <url>',
  summary: "says before a push what its LFS objects cost in blob uploads (knotless's pre-push hook runs it)",
  details: [
    "Reads git's pre-push input on stdin, asks git-lfs which LFS objects the push uploads (git lfs pre-push --dry-run), and says in one line each object that needs more than 100 blob uploads, counting what its record already lists. git-lfs shows its transfer agent's own lines only with GIT_TRACE=1; git shows a hook's. `knotless lfs install` writes the hook that runs this before git-lfs's own.",
  ],
  positionals: { min: 2, max: 2 },
  async run({ ctx, io, args }) {
    const [name, url] = args.positionals as [string, string];
    // Another remote's LFS objects are its LFS server's business.
    if (!url.startsWith('knotless://')) return;
    const input = fs.readFileSync(0, 'utf8');
    if (input.trim() === '') return;
    const git = async (argv: string[], stdin = '') => {
      try {
        return (await runGit(argv, { input: stdin })).stdout.toString();
      } catch (err) {
        if (!(err instanceof GitError)) throw err;
        throw new KnotlessError(
          'usage',
          `git ${argv.slice(0, 2).join(' ')} failed; is git-lfs set up (git lfs install)?`,
          {
            cause: err,
          },
        );
      }
    };
    // git-lfs's own reckoning of what the push uploads, from the same input its hook is given.
    const planned = await git(['lfs', 'pre-push', '--dry-run', name, url], input);
    const oids = [...new Set([...planned.matchAll(/^push ([0-9a-f]{64}) => /gm)].map((m) => m[1]!))];
    if (oids.length === 0) return;
    const storage = /^LfsStorageDir=(.*)$/m.exec(await git(['lfs', 'env']))?.[1];
    if (storage === undefined) return;
    const objects = oids.flatMap((oid) => {
      const file = path.join(storage, 'objects', oid.slice(0, 2), oid.slice(2, 4), oid);
      // One git-lfs does not have here is git-lfs's to report when it uploads.
      return fs.existsSync(file) ? [{ oid, size: fs.statSync(file).size }] : [];
    });
    const c = ctx();
    const target = parseKnotlessUrl(url);
    const owner = await c.resolver.resolve(target.owner);
    const remote = c.remoteRepo(owner, target.repo, (m) => io.err(`knotless: warning: ${m}`));
    const auth = await activeSession(c);
    // Someone else's repository: the upload refuses it, in git-lfs's error line.
    if (auth.session.did !== owner.did) return;
    const env: LfsEnv = {
      cache: new BlobCache(c.config.cacheDir),
      cacheDir: c.config.cacheDir,
      say: (l) => io.err(l),
    };
    for (const o of objects) {
      // The record is read only for an object that could need that many.
      if ((await lfsBlobsNeeded(remote, auth, env, o.size)) <= LFS_BLOB_NOTICE) continue;
      const left = await lfsUploadsLeft(remote, auth, env, o);
      if (left > LFS_BLOB_NOTICE)
        io.err(`knotless: LFS object ${o.oid.slice(0, 12)} (${o.size} bytes) needs ${left} blob uploads.`);
    }
  },
};
