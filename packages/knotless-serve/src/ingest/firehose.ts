import { REF_COLLECTION, REPO_COLLECTION } from 'knotless-core';
import { REFS_COLLECTION, REFS_PART_COLLECTION } from 'knotless-core/records/collections';
import type { Index } from '../db/index-store.ts';
import type { LogFields } from '../log.ts';
import { accountChanged } from './accounts.ts';
import { applyWrite } from './apply.ts';
import { InvalidRecord, PULL, type PullRecord } from 'knotless-core/forge/records';
import { FORGE_COLLECTIONS, isForgeCollection } from 'knotless-core/forge/kinds/table';
import { forgeRecords } from '../model/forge-records.ts';
import type { Identities } from './identities.ts';
import { lexToJson } from '@atproto/lexicon';
import { followStream } from './stream.ts';

/** A followed event stream. */
export interface Subscription {
  service: string;
  stop(): Promise<void>;
}

/** What the stream tells the rest of the appview. */
export interface StreamHooks {
  /** A repository's refs changed in the index: its mirror should catch up. */
  changed(did: string, repo: string): void;
  /** A pull request was opened or got a round (`did` its author): its page will want the commits. */
  pulled?(did: string, record: PullRecord): void;
  /** The stream lost events (the service refused or no longer holds the position). */
  gap(service: string, reason: string): void;
  /** This account's knotless records must be read again whole (a #sync event, an event that failed). */
  recheck(did: string): void;
  log(line: string, fields?: LogFields): void;
}

const KNOTLESS = new Set<string>([
  REPO_COLLECTION,
  REF_COLLECTION,
  REFS_COLLECTION,
  REFS_PART_COLLECTION,
  ...FORGE_COLLECTIONS,
]);

/**
 * Follows `service`'s com.atproto.sync.subscribeRepos (a relay's or a PDS's; stream.ts). Only
 * knotless records are kept, each commit verified against the account's key. Each event's writes
 * and its sequence number are saved in one transaction, and the position at least every second
 * besides, so a restart resumes just after the last event indexed; a replayed event changes nothing.
 */
export async function follow(
  service: string,
  index: Index,
  identities: Identities,
  hooks: StreamHooks,
): Promise<Subscription> {
  const stream = await followStream({
    service,
    idResolver: identities.idResolver,
    wanted: (c) => KNOTLESS.has(c),
    getCursor: () => index.cursor(service),
    saveCursor: (seq) => index.saveCursor({ service, seq }),
    dropCursor: () => index.dropCursor(service),
    gap: (reason) => hooks.gap(service, reason),
    recheck: (did) => hooks.recheck(did),
    verified: async (did, rev) => {
      // The account's verified revision moves on with each commit of it checked here (the key is
      // the one the check used, from the resolver's cache); an account not in the index is not kept.
      const owner = await index.owner(did);
      if (owner === undefined) return;
      const key = await identities.signingKey(did);
      await index.putVerified(did, { rev, key, pds: owner.pds, at: new Date().toISOString() });
    },
    log: (line) => hooks.log(line),
    handle: async (evt) => {
      const source = { service, seq: evt.seq };
      if (evt.event === 'identity' || evt.event === 'account') {
        // Handles and PDSes change by identity events, statuses by account events (a move brings
        // both); an account we never indexed is not worth a lookup.
        await accountChanged(evt.did, index, identities, hooks).catch((err: unknown) =>
          hooks.log(`checking ${evt.did} after its ${evt.event} event: ${String(err)}`),
        );
        return;
      }
      if (evt.event === 'sync') {
        // The account's repository was reset (a migration, a repair): its records are read again.
        if ((await index.owner(evt.did)) !== undefined) hooks.recheck(evt.did);
        return;
      }
      const touched = await applyWrite(
        index,
        {
          did: evt.did,
          collection: evt.collection,
          rkey: evt.rkey,
          rev: evt.rev,
          cid: evt.event === 'delete' ? null : evt.cid.toString(),
          record: evt.event === 'delete' ? null : lexToJson(evt.record),
          time: evt.time,
        },
        source,
        (line, fields) => hooks.log(line, fields),
      );
      if (evt.collection === PULL && evt.event !== 'delete' && hooks.pulled !== undefined) {
        // A record the lexicon refuses was skipped, and logged, as it was indexed above.
        let record: PullRecord | undefined;
        try {
          record = await forgeRecords.pull(lexToJson(evt.record));
        } catch (err) {
          if (!(err instanceof InvalidRecord)) throw err;
        }
        if (record !== undefined) hooks.pulled(evt.did, record);
      }
      if (isForgeCollection(evt.collection) && evt.event !== 'delete') {
        // Pages name a record's author by handle: resolve a new author once (kept in the index).
        await identities
          .owner(evt.did)
          .catch((err: unknown) => hooks.log(`resolving ${evt.did}: ${String(err)}`));
        return;
      }
      if (touched === undefined) return;
      // The PDS and handle of the account that wrote it are needed by the mirror (a maintainer's
      // holds their packs) and the pages; resolve them once.
      await identities
        .owner(evt.did)
        .catch((err: unknown) => hooks.log(`resolving ${evt.did}: ${String(err)}`));
      hooks.changed(touched.did, touched.repo);
    },
  });
  return { service, stop: () => stream.stop() };
}
