import { REF_COLLECTION, REPO_COLLECTION } from 'knotless-core';
import type { Index } from '../db/index-store.ts';
import { accountChanged } from './accounts.ts';
import { applyWrite } from './apply.ts';
import { FORGE_COLLECTIONS, isForgeCollection } from './forge-records.ts';
import type { Identities } from './identities.ts';
import { lexToJson } from './records.ts';

/** A followed event stream. */
export interface Subscription {
  service: string;
  stop(): Promise<void>;
}

/** What the stream tells the rest of the appview. */
export interface StreamHooks {
  /** A repository's refs changed in the index: its mirror should catch up. */
  changed(did: string, repo: string): void;
  log(line: string): void;
}

/**
 * Follows `service`'s com.atproto.sync.subscribeRepos with @atproto/sync, which verifies each
 * commit's signature against the account's key. Only knotless records are kept. Events are handled
 * one at a time, and each event's writes and its sequence number are saved in one transaction, so a
 * restart resumes exactly after the last event indexed; a replayed event changes nothing.
 */
export async function follow(
  service: string,
  index: Index,
  identities: Identities,
  hooks: StreamHooks,
): Promise<Subscription> {
  const { Firehose } = await import('@atproto/sync');
  const firehose = new Firehose({
    idResolver: identities.idResolver,
    service,
    filterCollections: [REPO_COLLECTION, REF_COLLECTION, ...FORGE_COLLECTIONS],
    excludeSync: true,
    getCursor: () => index.cursor(service),
    handleEvent: async (evt) => {
      const source = { service, seq: evt.seq };
      if (evt.event === 'identity' || evt.event === 'account') {
        // Handles and PDSes change by identity events, statuses by account events (a move brings
        // both); an account we never indexed is not worth a lookup.
        await accountChanged(evt.did, index, identities, hooks).catch((err: unknown) =>
          hooks.log(`checking ${evt.did} after its ${evt.event} event: ${String(err)}`),
        );
        await index.saveCursor(source);
        return;
      }
      if (evt.event === 'sync') return;
      const repo = await applyWrite(
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
        (line) => hooks.log(line),
      );
      if (isForgeCollection(evt.collection) && evt.event !== 'delete') {
        // Pages name a record's author by handle: resolve a new author once (kept in the index).
        await identities
          .owner(evt.did)
          .catch((err: unknown) => hooks.log(`resolving ${evt.did}: ${String(err)}`));
        return;
      }
      if (repo === undefined) return;
      // The owner's PDS and handle are needed by the mirror and the pages; resolve them once.
      await identities
        .owner(evt.did)
        .catch((err: unknown) => hooks.log(`resolving ${evt.did}: ${String(err)}`));
      hooks.changed(evt.did, repo);
    },
    onError: (err) =>
      hooks.log(
        `stream ${service}: ${err.message}${err.cause instanceof Error ? ` (${err.cause.message})` : ''}`,
      ),
  });
  void firehose.start();
  hooks.log(`following ${service}`);
  return { service, stop: () => firehose.destroy() };
}
