export { readConfig, type Config } from './config/env.ts';
export { KnotlessError, isKnotlessError, type ErrorCode } from './errors.ts';
export { IdentityResolver, type Identity } from './identity/resolver.ts';
export { RepoRecords } from './records/repo-records.ts';
export { checkRepoName, isValidRepoName, parseRepoSpec } from './records/name.ts';
// For the appview (knotless-serve): reading records and verifying packs exactly as the helper does.
export { REPO_COLLECTION, REF_COLLECTION, refKeyPrefix } from './records/collections.ts';
export {
  parseRefRecord,
  unionPacks,
  MAX_RECORD_BYTES,
  type RefRecord,
  type PackEntry,
  type BlobRef,
} from './records/ref-record.ts';
export { BlobGone, loadPack, verifyPack, mapLimit, withRelist } from './packs/transfer.ts';
export { blobMatchesCid } from './records/cid.ts';
export { BlobCache } from './cache/blob-cache.ts';
export { IndexedPacks } from './cache/indexed-packs.ts';
export { indexPack, parsePackInfo } from './git/pack.ts';
export { PackFile } from './git/pack-file.ts';
export { runGit, gitText, GitError, type RunGitOptions } from './git/run.ts';
export { serveHttpBackend, type HttpBackendRequest } from './git/http-backend.ts';
export { safeText } from './text/terminal.ts';
export { isValidRefName, isObjectId } from './git/refname.ts';
export { XrpcClient, XrpcError } from './xrpc/client.ts';
export {
  fetchOver,
  transportFor,
  type Transport,
  type HttpRequest,
  type HttpResponse,
} from './xrpc/transport.ts';
export { listRecords, rkeyOf, type ListedRecord } from './records/list-records.ts';
export {
  decide,
  inTeam,
  ISSUE_AUTHOR_MAY,
  PULL_AUTHOR_MAY,
  type Decided,
  type Decision,
  type Team,
} from './records/forge-authority.ts';
export { keysNamed, shortIds, utcTime } from './forge/short-id.ts';
