import { KnotlessError } from '../errors.ts';
import type { Identity } from '../identity/resolver.ts';
import { XrpcError, generalFailure, type Authorizer, type XrpcClient } from '../xrpc/client.ts';
import { pdsRefusal } from '../xrpc/pds-errors.ts';
import { crashPoint } from '../crash.ts';
import {
  REF_COLLECTION,
  REFS_COLLECTION,
  REFS_PART_COLLECTION,
  REPO_COLLECTION,
  refKeyPrefix,
} from './collections.ts';
import { refTableKey } from './ref-table.ts';
import { listRecords, rkeyOf } from './list-records.ts';

/** An authorizer that knows the account it acts as (the CLI's sessions are these). */
/** Deletes per commit: the PDS's limit of 200 writes in one applyWrites, less one to spare. */
const DELETES_PER_COMMIT = 199;

export interface SessionAuthorizer extends Authorizer {
  readonly session: { readonly did: string; readonly pds: string };
}

/** A `dev.knotless.repo` record. */
export interface RepoRecord {
  description?: string;
  /** The at-uri of the repository record this one was forked from. */
  forkOf?: string;
  createdAt: string;
  /** A private repository: its members' DIDs (the record's `private` field; private/repo-keys.ts). */
  private?: { members: string[] };
}

/** A repository as listed: its name (the record key) and record. */
export interface RepoEntry {
  name: string;
  record: RepoRecord;
}

/** Reads a repo record leniently: unknown fields are ignored, wrong types dropped. */
export function parseRepoRecord(value: unknown): RepoRecord {
  const v = (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown>;
  const record: RepoRecord = { createdAt: typeof v['createdAt'] === 'string' ? v['createdAt'] : '' };
  if (typeof v['description'] === 'string') record.description = v['description'];
  if (typeof v['forkOf'] === 'string' && v['forkOf'].startsWith('at://')) record.forkOf = v['forkOf'];
  const priv = v['private'] as { members?: unknown } | undefined;
  if (typeof priv === 'object' && priv !== null)
    record.private = {
      members: (Array.isArray(priv.members) ? priv.members : [])
        .map((m) => (m as { did?: unknown } | null)?.did)
        .filter((d): d is string => typeof d === 'string'),
    };
  return record;
}

function missingRepo(owner: string, name: string, cause?: unknown): KnotlessError {
  return new KnotlessError(
    'repo-missing',
    `${owner} has no repository named ${name}; check the name with \`knotless repo list ${owner}\`.`,
    { cause },
  );
}

/**
 * Makes the XRPC client for a PDS, authorized when `authorizer` is given. Handed in (Context builds
 * it, see `Context.repoRecords`) so that this layer knows nothing of configuration or agents.
 */
export type ClientFor = (service: string, authorizer?: Authorizer) => XrpcClient;

/** Repository records: create, read, list and delete, against the owner's PDS. */
export class RepoRecords {
  readonly #client: ClientFor;

  constructor(client: ClientFor) {
    this.#client = client;
  }

  /**
   * Creates a repository in the session's account (a fork names its original in `forkOf`); fails
   * with `repo-exists` if the name is taken. `commit`: the account's commit the write made, when
   * its answer said (not after a lost answer read back).
   */
  async create(
    auth: SessionAuthorizer,
    name: string,
    description?: string,
    forkOf?: string,
    /** A private repository's `private` field (private/members.ts `newPrivate`). */
    privateField?: Record<string, unknown>,
  ): Promise<{ record: RepoRecord; commit?: string }> {
    const record: RepoRecord = { createdAt: new Date().toISOString() };
    if (description !== undefined && description !== '') record.description = description;
    if (forkOf !== undefined) record.forkOf = forkOf;
    const client = this.#client(auth.session.pds, auth);
    let commit: string | undefined;
    try {
      // swapRecord: null makes the write conditional on the key being free.
      const res = await client.procedure<{ commit?: { cid?: unknown } }>('com.atproto.repo.putRecord', {
        repo: auth.session.did,
        collection: REPO_COLLECTION,
        rkey: name,
        record: {
          $type: REPO_COLLECTION,
          ...record,
          ...(privateField === undefined ? {} : { private: privateField }),
        },
        swapRecord: null,
      });
      if (typeof res?.commit?.cid === 'string') commit = res.commit.cid;
    } catch (err) {
      // Retried after a lost answer, the create conflicts with itself: the record read back is ours.
      if (err instanceof XrpcError && pdsRefusal(err) === 'swap-conflict' && err.attempts > 1) {
        const mine = await client
          .query<{ value?: { createdAt?: unknown } }>('com.atproto.repo.getRecord', {
            repo: auth.session.did,
            collection: REPO_COLLECTION,
            rkey: name,
          })
          .catch((readErr: unknown) => {
            // Unknown whether the record is ours: say what failed rather than "it exists".
            throw generalFailure(readErr, `reading back ${name}`);
          });
        if (mine?.value?.createdAt === record.createdAt) return { record };
      }
      if (err instanceof XrpcError && pdsRefusal(err) === 'swap-conflict') {
        throw new KnotlessError(
          'repo-exists',
          `You already have a repository named ${name}; pick another name.`,
          {
            cause: err,
          },
        );
      }
      throw generalFailure(err, `creating ${name}`);
    }
    return commit === undefined ? { record } : { record, commit };
  }

  /** Reads one repository's record (public: no login needed). */
  async get(owner: Identity, name: string): Promise<RepoRecord> {
    const client = this.#client(owner.pds);
    const label = owner.handle ?? owner.did;
    try {
      const res = await client.query<{ value: unknown }>('com.atproto.repo.getRecord', {
        repo: owner.did,
        collection: REPO_COLLECTION,
        rkey: name,
      });
      return parseRepoRecord(res.value);
    } catch (err) {
      if (err instanceof XrpcError && pdsRefusal(err) === 'record-missing')
        throw missingRepo(label, name, err);
      throw generalFailure(err, `reading ${label}/${name}`);
    }
  }

  /** Lists an account's repositories in name order (public: no login needed). */
  async list(owner: Identity): Promise<RepoEntry[]> {
    const client = this.#client(owner.pds);
    const out: RepoEntry[] = [];
    try {
      for await (const r of listRecords(client, owner.did, REPO_COLLECTION)) {
        out.push({ name: rkeyOf(r.uri), record: parseRepoRecord(r.value) });
      }
    } catch (err) {
      throw generalFailure(err, `listing the repositories of ${owner.handle ?? owner.did}`);
    }
    return out;
  }

  /** The keys of every ref record of a repository. */
  async refKeys(owner: Identity, name: string): Promise<string[]> {
    const prefix = refKeyPrefix(name);
    const keys: string[] = [];
    const client = this.#client(owner.pds);
    try {
      // Ascending listing starts after the cursor; the prefix itself sorts before every key it begins.
      for await (const r of listRecords(client, owner.did, REF_COLLECTION, {
        after: prefix,
        keep: (k) => k.startsWith(prefix),
      })) {
        keys.push(rkeyOf(r.uri));
      }
    } catch (err) {
      throw generalFailure(err, `listing the refs of ${name}`);
    }
    return keys;
  }

  /**
   * The owner's ref table of a repository and its parts, as keys: the table's when there is one, and
   * every part record under its key (`<table key>~<32 hex digits>`), listed or not. A maintainer's
   * table of another account's repository of the same name (`name~<DID>`) and its parts are not the
   * repository's, and are never among them.
   */
  async tableKeys(owner: Identity, name: string): Promise<{ table: boolean; parts: string[] }> {
    const key = refTableKey(name, owner.did, owner.did);
    const client = this.#client(owner.pds);
    let table = true;
    try {
      await client.query('com.atproto.repo.getRecord', {
        repo: owner.did,
        collection: REFS_COLLECTION,
        rkey: key,
      });
    } catch (err) {
      if (!(err instanceof XrpcError && pdsRefusal(err) === 'record-missing'))
        throw generalFailure(err, `reading the ref table of ${name}`);
      table = false;
    }
    const part = new RegExp(`^${key.replace(/[.]/g, '\\.')}~[0-9a-f]{32}$`);
    const parts: string[] = [];
    try {
      for await (const r of listRecords(client, owner.did, REFS_PART_COLLECTION, {
        after: `${key}~`,
        keep: (k) => k.startsWith(`${key}~`),
      })) {
        const k = rkeyOf(r.uri);
        if (part.test(k)) parts.push(k);
      }
    } catch (err) {
      throw generalFailure(err, `listing the ref table parts of ${name}`);
    }
    return { table, parts };
  }

  /**
   * Deletes a repository: its ref records first (ignored while a ref table exists), then its ref table
   * and every part of it (the table in the first commit, so no reader finds a table without its
   * parts), then the repo record, so an interrupted delete leaves a repository that still lists and
   * can be deleted again, which finishes it. Returns how many ref records went. The caller checks that
   * the repository exists first (the CLI does, before asking for confirmation).
   */
  async delete(auth: SessionAuthorizer, owner: Identity, name: string): Promise<number> {
    const [keys, tabled] = await Promise.all([this.refKeys(owner, name), this.tableKeys(owner, name)]);
    const client = this.#client(auth.session.pds, auth);
    const deletes = (collection: string, rkeys: string[]) =>
      rkeys.map((rkey) => ({ $type: 'com.atproto.repo.applyWrites#delete', collection, rkey }));
    try {
      for (let i = 0; i < keys.length; i += 100) {
        await client.procedure('com.atproto.repo.applyWrites', {
          repo: auth.session.did,
          writes: deletes(REF_COLLECTION, keys.slice(i, i + 100)),
        });
      }
      crashPoint('delete:refs-deleted');
      const table = [
        ...(tabled.table ? deletes(REFS_COLLECTION, [refTableKey(name, owner.did, owner.did)]) : []),
        ...deletes(REFS_PART_COLLECTION, tabled.parts),
      ];
      for (let i = 0; i < table.length; i += DELETES_PER_COMMIT) {
        await client.procedure('com.atproto.repo.applyWrites', {
          repo: auth.session.did,
          writes: table.slice(i, i + DELETES_PER_COMMIT),
        });
        crashPoint('delete:table-deleted');
      }
      await client.procedure('com.atproto.repo.deleteRecord', {
        repo: auth.session.did,
        collection: REPO_COLLECTION,
        rkey: name,
      });
    } catch (err) {
      throw generalFailure(err, `deleting ${name}`);
    }
    return keys.length;
  }
}
