/** Collection NSIDs; their lexicons are in the repository's lexicons/ folder. */
export const REPO_COLLECTION = 'dev.knotless.repo';
export const REF_COLLECTION = 'dev.knotless.ref';
/** The ref table (one record per repository and writer) and a large table's parts. */
export const REFS_COLLECTION = 'dev.knotless.refs';
export const REFS_PART_COLLECTION = 'dev.knotless.refs.part';
/** A Git LFS object's blobs, listed in order (ops/lfs.ts). */
export const LFS_COLLECTION = 'dev.knotless.lfs';

/**
 * Every ref record of a repository has a key starting with this prefix, so that they are contiguous
 * in a listing. `~` cannot occur in a repository name, which makes the prefix unambiguous.
 */
export function refKeyPrefix(repo: string): string {
  return `${repo}~`;
}

/** A device's public key (private repositories' keys are wrapped to these). */
export const KEY_COLLECTION = 'dev.knotless.key';

/**
 * The git side's collections a knotless OAuth sign-in asks to write (repositories, refs and ref
 * tables with their parts, LFS objects, device keys); the forge's kinds say for themselves, and
 * forge/oauth-scope.ts puts both together.
 */
export const GIT_SIGN_IN_COLLECTIONS = [
  REPO_COLLECTION,
  REF_COLLECTION,
  REFS_COLLECTION,
  REFS_PART_COLLECTION,
  LFS_COLLECTION,
  KEY_COLLECTION,
];

/** The appview's webhook methods (lexicons/dev/knotless/webhook/), called with service auth. */
export const WEBHOOK_METHODS = [
  'dev.knotless.webhook.list',
  'dev.knotless.webhook.add',
  'dev.knotless.webhook.remove',
  'dev.knotless.webhook.test',
] as const;
export type WebhookMethod = (typeof WEBHOOK_METHODS)[number];

/**
 * What the CLI's OAuth sign-in asks for besides `KNOTLESS_OAUTH_SCOPE` (forge/oauth-scope.ts):
 * service-auth tokens (com.atproto.server.getServiceAuth) for the webhook methods, for `knotless
 * webhook`. Their
 * audience is `*`: an rpc scope names either any audience or a DID with a `#service` fragment, and
 * the appview's audience is its bare did:web, whichever appview the user points the CLI at.
 */
export const WEBHOOK_RPC_SCOPE = WEBHOOK_METHODS.map((m) => `rpc:${m}?aud=*`).join(' ');
