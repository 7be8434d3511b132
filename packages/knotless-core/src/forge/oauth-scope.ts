// What a knotless OAuth sign-in asks for, in one place for the CLI's `knotless login` and the
// appview's sign-in. It is put together here, above both halves it names: the git side's collections
// (records/collections.ts) and the forge's kinds a sign-in writes (each kind says so in its module),
// so that a new kind needs no line here.
import { GIT_SIGN_IN_COLLECTIONS } from '../records/collections.ts';
import { SIGN_IN_COLLECTIONS } from './kinds/table.ts';

/**
 * knotless's own collections (repositories, refs, LFS objects and device keys; pull requests, issues,
 * their states and comments, stars) and pack blobs, nothing else. A repo scope names exact
 * collections (no prefix wildcard exists), so each is listed.
 */
export const KNOTLESS_OAUTH_SCOPE = [
  'atproto',
  ...[...GIT_SIGN_IN_COLLECTIONS, ...SIGN_IN_COLLECTIONS].map((c) => `repo:${c}`),
  'blob:application/x-git-packed-objects',
].join(' ');
