import fs from 'node:fs';
import path from 'node:path';
import {
  blobMatchesCid,
  indexPack,
  KnotlessError,
  loadPack,
  parsePackInfo,
  XrpcClient,
  XrpcError,
  type BlobCache,
  type PackFile,
  type Transport,
} from 'knotless-core';
import type { StoredRound as Round } from '../db/schema.ts';
import type { Identities } from '../ingest/identities.ts';

/** What loading a round's pack needs from the mirror. */
export interface RoundPackDeps {
  identities: Identities;
  transport: Transport;
  cache: BlobCache;
  maxPackBytes: number;
  maxRoundBytes: number;
}

/**
 * The round packs a mirror took in, one `<cid> <size>` line each, kept beside its objects: anyone
 * may open pull requests against any repository, so what they make the mirror store is bounded.
 */
function ledger(gitDir: string): string {
  return path.join(gitDir, 'knotless-rounds');
}

/** The ledger's lines: `[cid, size]` of each round pack taken in. */
function ledgerLines(gitDir: string): [string, number][] {
  let text: string;
  try {
    text = fs.readFileSync(ledger(gitDir), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => [l.split(' ')[0] ?? '', Number(l.split(' ')[1] ?? 0)]);
}

/** Thrown when a round's commits cannot be had; the page says so instead of the diff. */
export class RoundUnavailable extends Error {
  override name = 'RoundUnavailable';
}

/**
 * Indexes a pull request round's pack (a blob in the PR author's PDS) into the target repository's
 * mirror, so that the round's head can be diffed against the base the mirror already has. No ref
 * is set: the objects stay unreachable, so clones of the mirror never carry them, and the mirror's
 * own syncs (which delete refs the records do not name) leave them alone.
 */
export async function loadRoundPack(
  deps: RoundPackDeps,
  authorDid: string,
  gitDir: string,
  round: Round,
): Promise<void> {
  const { cid, size } = round.pack;
  if (size > deps.maxPackBytes)
    throw new RoundUnavailable(`the round's pack has ${size} bytes, over the limit of ${deps.maxPackBytes}`);
  const lines = ledgerLines(gitDir);
  // Taken in already: a round whose head is still not whole (a pack without its trees) is not
  // downloaded and counted again at each view of its page.
  if (lines.some(([c]) => c === cid)) return;
  const taken = lines.reduce((n, [, bytes]) => n + bytes, 0);
  if (taken + size > deps.maxRoundBytes)
    throw new RoundUnavailable(
      `this repository's mirror already holds ${taken} bytes of pull request rounds, and this round's ${size} more would pass the limit of ${deps.maxRoundBytes}`,
    );
  const author = await deps.identities.owner(authorDid);
  if (author.pds === null) throw new RoundUnavailable(`${authorDid} names no PDS`);
  const client = new XrpcClient(author.pds, { transport: deps.transport });
  let bytes = deps.cache.get(cid);
  if (bytes === undefined) {
    try {
      // The record says how big the blob is: a longer answer is cut off as soon as it passes that.
      bytes = await client.queryBytes('com.atproto.sync.getBlob', { did: authorDid, cid }, size);
    } catch (err) {
      if (!(err instanceof XrpcError)) throw err;
      throw new RoundUnavailable(`the author's PDS did not give the round's pack (${err.message})`, {
        cause: err,
      });
    }
    if (!blobMatchesCid(bytes, cid))
      throw new RoundUnavailable(`the round's pack does not match its CID ${cid}`);
    deps.cache.put(cid, bytes);
  }
  let info;
  try {
    info = parsePackInfo(bytes);
  } catch (err) {
    throw new RoundUnavailable(`the round's pack is not a git pack`, { cause: err });
  }
  // loadPack on the bytes as an inline pack: the same checks the helper makes on any pack (its
  // checksum, and no object inflating past the bound) before git sees it.
  let checked: PackFile;
  try {
    checked = await loadPack(
      client,
      authorDid,
      { id: info.id, size: bytes.length, count: info.count, inline: bytes },
      deps.cache,
      () => {},
    );
  } catch (err) {
    if (err instanceof KnotlessError) throw new RoundUnavailable(err.message, { cause: err });
    throw err;
  }
  const { keepFile } = await indexPack(checked, gitDir, false).finally(() => checked.close());
  fs.rmSync(keepFile, { force: true });
  fs.appendFileSync(ledger(gitDir), `${cid} ${size}\n`);
}
