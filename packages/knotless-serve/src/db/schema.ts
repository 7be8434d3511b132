/** Where ingestion stopped on one event stream: the last sequence number fully indexed. */
export interface CursorTable {
  service: string;
  seq: number | string;
}

/** An account that owns (or owned) knotless repositories. */
export interface OwnerTable {
  did: string;
  /** The verified handle; null when the DID document's handle does not resolve back. */
  handle: string | null;
  pds: string | null;
  resolved_at: string;
  /**
   * Null while the account is active; else what its PDS says it is (`deactivated`, `takendown`,
   * `suspended`, `deleted`): its repositories and records are hidden meanwhile.
   */
  status: string | null;
  /**
   * The newest revision of the account's repository the appview verified (a signed commit, read by
   * a backfill or on the event stream), with when, and the key and PDS it was verified at; null
   * until one was.
   */
  verified_rev: string | null;
  verified_at: string | null;
  verified_key: string | null;
  verified_pds: string | null;
}

/** A `dev.knotless.repo` record. Deleted records stay as tombstones so that a replayed create loses. */
export interface RepoTable {
  did: string;
  name: string;
  description: string | null;
  created_at: string | null;
  /** The repository record this one was forked from (an at-uri), if any. */
  fork_of: string | null;
  /** 1 for a private repository (its record's `private`): its refs are sealed and never indexed. */
  private: number;
  /** The account revision that last wrote this row: older events never overwrite newer ones. */
  rev: string;
  deleted: number;
  indexed_at: string;
}

/** A `dev.knotless.ref` record (or its tombstone), keyed by record key as delete events carry only that. */
export interface RefTable {
  did: string;
  rkey: string;
  repo: string;
  ref: string;
  target: string | null;
  symref: string | null;
  peeled: string | null;
  /** The record's pack list as JSON (inline packs as base64), what the mirror indexes. */
  packs: string;
  cid: string | null;
  rev: string;
  deleted: number;
  updated_at: string;
}

/**
 * A `dev.knotless.refs` record (or its tombstone), whoever wrote it. `owner` is 1 for an account's
 * table of its own repository (its key is the repository's name): only those give refs.
 */
export interface RefTableRow {
  did: string;
  rkey: string;
  /** The repository its key names (before any `~`), in `did`'s account or, for a maintainer's, another's. */
  repo: string;
  owner: number;
  cid: string | null;
  rev: string;
  deleted: number;
  /** The record in JSON form; null once deleted. */
  value: string | null;
  /** Why its latest version gave no listing (a part missing or not the one named, a broken rule). */
  problem: string | null;
  indexed_at: string;
}

/** A `dev.knotless.refs.part` record (or its tombstone). */
export interface RefTablePartRow {
  did: string;
  rkey: string;
  cid: string | null;
  rev: string;
  deleted: number;
  value: string | null;
}

/**
 * A ref of a repository that has an owner's table, as the last listing that table gave whole
 * showed it (`rkey` is `<table key>#<ref>`, `cid` and `rev` the table's when it last changed it).
 */
export interface TableRefRow {
  did: string;
  repo: string;
  ref: string;
  rkey: string;
  target: string | null;
  symref: string | null;
  peeled: string | null;
  packs: string;
  cid: string | null;
  rev: string;
  updated_at: string;
}

/** One change of one ref, as seen on the event stream (or found by a backfill). */
export interface PushTable {
  did: string;
  rkey: string;
  rev: string;
  repo: string;
  ref: string;
  old_target: string | null;
  new_target: string | null;
  time: string;
  seq: number | string | null;
  /** Whose table write it was: null for the repository's owner, else the maintainer's DID. */
  pusher: string | null;
}

/** A maintainer the owner's ref table of a repository lists (migration 0013). */
export interface RepoMaintainerTable {
  did: string;
  repo: string;
  maintainer: string;
  since: string;
  /** Its place in the owner's list, from 0. */
  position: number;
}

/** Columns every forge record row has: its author, key, revision and tombstone. */
interface ForgeRow {
  /** The record's author (the account whose repository holds it) and its key. */
  did: string;
  rkey: string;
  cid: string | null;
  rev: string;
  deleted: number;
  /** createdAt, normalised to UTC with milliseconds so that rows sort by it as text. */
  created_at: string;
  indexed_at: string;
}

/** A pull request round as the index keeps it (`PullTable.rounds`): its pack named by CID alone; knotless-core's pull kind makes it. */
export type { StoredRound } from 'knotless-core/forge/kinds/pull';

/** A `dev.knotless.pull` record, with the state its status records give it by the authority rule. */
export interface PullTable extends ForgeRow {
  repo_did: string;
  repo_name: string;
  base: string;
  head_repo: string;
  head_branch: string;
  title: string;
  body: string | null;
  /** The rounds as JSON: StoredRound[]. */
  rounds: string;
  /** Kept current from pull_statuses: open, closed or merged. */
  state: string;
  merged: string | null;
  /** The required checks the owner's merge overrode (JSON array of reasons), when it did. */
  ignored_checks: string | null;
  /** JSON array of the labels the repository's owner set. */
  labels: string;
}

/** A `dev.knotless.pull.status` record, whoever wrote it; only some count (see refreshTarget in forge-state.ts). */
export interface PullStatusTable extends ForgeRow {
  pull_did: string;
  pull_rkey: string;
  status: string;
  merged: string | null;
  /** The record's ignoredChecks as a JSON array, when it has them. */
  ignored_checks: string | null;
  labels: string;
}

/** A runner's `dev.knotless.check`: its latest verdict on one context of one commit. */
export interface CheckTable extends ForgeRow {
  repo_did: string;
  repo_name: string;
  /** The commit checked (40 hex digits). */
  sha: string;
  context: string;
  state: string;
  target_url: string | null;
  description: string | null;
}

/** A `dev.knotless.protection` record, whoever wrote it: only the owner's counts. */
export interface ProtectionTable extends ForgeRow {
  repo: string;
  /** The branches' protection as JSON: BranchProtection[]. */
  branches: string;
}

/** A `dev.knotless.issue` record, with its state. */
export interface IssueTable extends ForgeRow {
  repo_did: string;
  repo_name: string;
  title: string;
  body: string | null;
  state: string;
  labels: string;
}

/** A `dev.knotless.issue.state` record, whoever wrote it. */
export interface IssueStateTable extends ForgeRow {
  issue_did: string;
  issue_rkey: string;
  state: string;
  labels: string;
}

/** A `dev.knotless.comment` record on a pull request or an issue. */
export interface CommentTable extends ForgeRow {
  subject_did: string;
  subject_collection: string;
  subject_rkey: string;
  round: number | null;
  /** The line of the round's diff it is about (the head side's path and line), if any. */
  path: string | null;
  line: number | null;
  body: string;
}

/** A `dev.knotless.star` record: `did` starred the repository `subject_did`/`subject_name`. */
export interface StarTable extends ForgeRow {
  subject_did: string;
  subject_name: string;
}

/** A handle a pull request's, issue's or comment's text mentions (db/mentions.ts). */
export interface MentionRow {
  /** The row's table: `pulls`, `issues` or `comments`. */
  tab: string;
  did: string;
  rkey: string;
  handle: string;
}

/** The whole index. */
export interface Database {
  cursors: CursorTable;
  owners: OwnerTable;
  repos: RepoTable;
  refs: RefTable;
  ref_tables: RefTableRow;
  ref_table_parts: RefTablePartRow;
  repo_maintainers: RepoMaintainerTable;
  table_refs: TableRefRow;
  pushes: PushTable;
  pulls: PullTable;
  pull_statuses: PullStatusTable;
  issues: IssueTable;
  issue_states: IssueStateTable;
  comments: CommentTable;
  mentions: MentionRow;
  stars: StarTable;
  checks: CheckTable;
  protections: ProtectionTable;
  oauth_states: OAuthStateTable;
  oauth_sessions: OAuthSessionTable;
  web_sessions: WebSessionTable;
  web_readers: WebReaderTable;
  webhooks: WebhookTable;
  webhook_deliveries: WebhookDeliveryTable;
  webhook_attempts: WebhookAttemptTable;
}

/** A signed-in account's notifications: last seen, and its feed's token (the SHA-256 of it). */
export interface WebReaderTable {
  did: string;
  seen_at: string;
  feed_token: string;
}

/** An OAuth authorization in flight (PKCE verifier, DPoP key), sealed; kept until its callback. */
export interface OAuthStateTable {
  key: string;
  sealed: string;
  created_at: string;
}

/** An account's OAuth session (tokens, DPoP key), sealed with the server's key. */
export interface OAuthSessionTable {
  did: string;
  sealed: string;
  updated_at: string;
}

/** A reader's browser session: the SHA-256 of its cookie, whose account, and its CSRF token. */
export interface WebSessionTable {
  id_hash: string;
  did: string;
  handle: string;
  csrf: string;
  created_at: string;
  expires_at: string;
}

/** A repository's webhook: where its events are posted, and the secret that signs them. */
export interface WebhookTable {
  id: string;
  repo_did: string;
  repo_name: string;
  url: string;
  secret: string;
  created_at: string;
}

/** One event to post to one webhook: the persisted queue and its outcome. */
export interface WebhookDeliveryTable {
  /** Also the `X-Knotless-Delivery` header. */
  id: string;
  webhook_id: string;
  event_key: string;
  /** The `X-Knotless-Event` header: push, pull_request, issue, comment or ping. */
  event: string;
  /** The JSON body, exactly as posted. */
  payload: string;
  state: 'pending' | 'delivered' | 'failed';
  attempts: number;
  /** When it may be tried next (ISO 8601, UTC). */
  next_at: string;
  /** A process claimed it until then; after that another may take it (its claimer died). */
  lease_until: string | null;
  created_at: string;
}

/** One attempt of a delivery: the receiver's HTTP status, or why there was none. */
export interface WebhookAttemptTable {
  delivery_id: string;
  at: string;
  status: number | null;
  error: string | null;
}
