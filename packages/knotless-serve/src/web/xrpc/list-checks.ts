import fs from 'node:fs';
import { atUri, CHECK } from 'knotless-core/forge/records';
import { resolveCommit } from '../../mirror/read.ts';
import { indexedVerdict } from '../checks.ts';
import { actorDid, required, XrpcHttpError, type XrpcHandler } from './common.ts';

/**
 * dev.knotless.listChecks: a commit's checks, each runner's latest verdict on each context, with
 * whether the owner trusts the runner; with `branch`, that branch's required checks and which have
 * not passed (knotless-core's rules); of the runners the owner does not trust at most
 * UNTRUSTED_SHOWN verdicts, and `moreUntrusted` says how many more there are. Only a commit the repository holds is answered: a check on
 * any other commit is shown nowhere.
 */
export const listChecks: XrpcHandler = async (site, params) => {
  const did = await actorDid(site, required(params, 'actor'));
  const name = required(params, 'repo');
  const commit = required(params, 'commit');
  if (!/^[0-9a-f]{40}$/.test(commit))
    throw new XrpcHttpError(400, 'InvalidRequest', 'commit is a full commit id, 40 hex digits');
  const repo = await site.index.repo(did, name);
  if (repo === undefined || repo.private === 1)
    throw new XrpcHttpError(400, 'RepoNotFound', `no repository ${name}`);
  const gitDir = site.mirror.gitDir(did, name);
  if (!fs.existsSync(gitDir) || (await resolveCommit(gitDir, commit)) !== commit)
    throw new XrpcHttpError(404, 'CommitNotFound', `the repository holds no commit ${commit}`);
  const branch = params.get('branch') ?? undefined;
  const v = await indexedVerdict(site, { did, name }, commit, branch === '' ? undefined : branch);
  return {
    commit,
    checks: v.shown.map((c) => ({
      uri: atUri(c.runner, CHECK, c.rkey),
      runner: {
        did: c.runner,
        ...(v.names.get(c.runner) === c.runner ? {} : { handle: v.names.get(c.runner) }),
      },
      context: c.context,
      state: c.state,
      trusted: c.trusted,
      ...(c.targetUrl === undefined ? {} : { targetUrl: c.targetUrl }),
      ...(c.description === undefined ? {} : { description: c.description }),
    })),
    // What the index left out of `checks`, so that a client never takes the 50 shown for all.
    ...(v.left === undefined
      ? {}
      : { moreUntrusted: v.left.count, ...(v.left.atLeast ? { moreUntrustedAtLeast: true } : {}) }),
    ...(v.required === undefined
      ? {}
      : {
          required: v.required,
          unmet: v.unmet.map((u) => ({ context: u.context, kind: u.kind, reason: u.reason, by: u.by })),
        }),
  };
};
