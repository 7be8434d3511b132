import type { Log } from '../log.ts';
import type { ForgeServices } from 'knotless-core/forge/services';
import type { Transport } from 'knotless-core/xrpc/transport';
import type { SignIn } from '../auth/oauth.ts';
import type { WebSessions } from '../auth/web-sessions.ts';
import type { Index } from '../db/index-store.ts';
import type { Notifications } from '../db/notifications.ts';
import type { Identities } from '../ingest/identities.ts';
import type { Mirror } from '../mirror/mirror.ts';
import type { ImageProxy } from './images.ts';
import type { Deliverer } from '../webhooks/deliver.ts';

/** What every request handler needs. */
export interface Site {
  index: Index;
  mirror: Mirror;
  /** The appview's public URL, without a trailing slash. */
  publicUrl: string;
  log: Log;
  /** Time limits, in ms: every request but smart-HTTP git, and smart-HTTP git. */
  requestTimeoutMs: number;
  gitTimeoutMs: number;
  /** Fetches README images from other hosts for readers, and signs the addresses pages use. */
  images: ImageProxy;
  /** Sign-in, when a server key is configured (always in dev mode). */
  signIn: SignIn | undefined;
  sessions: WebSessions;
  notifications: Notifications;
  identities: Identities;
  /** What the core's forge operations are handed: clients over `transport`, the caches' place. */
  forge: ForgeServices;
  transport: Transport;
  /** The PLC directory an account's DID document (its signing key) is read from. */
  plcUrl: string;
  /** Dev mode: loopback and private addresses allowed. */
  dev: boolean;
  /** True behind https: cookies are Secure. */
  secure: boolean;
  /** Posts webhook deliveries; woken when one is queued from a page. */
  webhooks?: Deliverer;
}

/** A repository a request is about, found in the index and its mirror. */
export interface RepoTarget {
  did: string;
  /** How the URL named the owner (handle, else DID): links keep using it. */
  owner: string;
  name: string;
  description: string | null;
  gitDir: string;
  /** The repository this one was forked from (its record's forkOf), as pages name it. */
  forkOf: { owner: string; name: string } | null;
  /** Its contents are encrypted for its members: nothing of them is indexed or shown. */
  private: boolean;
  /**
   * The maintainers its owner's ref table lists (they decide as the owner), in order, each with the
   * handle the index verified when it knows one.
   */
  maintainers: { did: string; handle: string | null }[];
  /**
   * A team's refs whose writers' values diverged (format.md, "Teams"), each with the names its other
   * values are listed under, as `knotless repo info` shows them.
   */
  diverged: { ref: string; apart: string[] }[];
}

export { HttpError, Redirect } from './http-error.ts';
