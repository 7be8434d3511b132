import { actorDid, limitOf, type XrpcHandler } from './common.ts';

/** dev.knotless.listPushes: recent ref changes, newest first; of one account or repository if given. */
export const listPushes: XrpcHandler = async (site, params) => {
  const actor = params.get('actor');
  const repo = params.get('repo');
  const did = actor === null ? undefined : await actorDid(site, actor);
  const rows = await site.index.pushes({
    ...(did === undefined ? {} : { did }),
    ...(repo === null ? {} : { repo }),
    limit: limitOf(params, 30, 100),
  });
  return {
    pushes: rows.map((p) => ({
      did: p.did,
      ...(p.handle === null ? {} : { handle: p.handle }),
      repo: p.repo,
      ref: p.ref,
      ...(p.old_target === null ? {} : { before: p.old_target }),
      ...(p.new_target === null ? {} : { after: p.new_target }),
      rev: p.rev,
      time: p.time,
      // Who pushed, when it was a maintainer of the repository rather than its owner.
      ...(p.pusher == null
        ? {}
        : { pusher: p.pusher, ...(p.pusher_handle == null ? {} : { pusherHandle: p.pusher_handle }) }),
    })),
  };
};
