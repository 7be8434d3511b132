import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { BlobCache } from '../cache/blob-cache.ts';
import { crashPoint } from '../crash.ts';
import { KnotlessError } from '../errors.ts';
import { readJson, writeFileAtomic } from '../fsutil.ts';
import { PackFile, READ_CHUNK, tempFile } from '../git/pack-file.ts';
import { runGit } from '../git/run.ts';
import { blobUploadLimit } from '../packs/server-info.ts';
import { BLOB_UPLOAD_NOTICE } from '../packs/store-packs.ts';
import { downloadBlob, uploadBlob } from '../packs/transfer.ts';
import { sealedPackSize } from '../private/pack-crypt.ts';
import { LFS_COLLECTION } from '../records/collections.ts';
import { parseBlobRef, type BlobRef } from '../records/ref-rules.ts';
import {
  lfsBlobCount,
  lfsComplete,
  lfsKey,
  MAX_LFS_BLOBS,
  parseLfsRecord,
  writeLfsRecord,
  type LfsRecord,
} from '../records/lfs-record.ts';
import { RECORD_ANSWER_BYTES } from '../records/ref-record.ts';
import type { RemoteRepo } from '../records/remote-repo.ts';
import { XrpcError, generalFailure, type Authorizer } from '../xrpc/client.ts';
import { pdsRefusal } from '../xrpc/pds-errors.ts';
import { UploadBudgetWatch } from '../xrpc/rate-limit.ts';

/** An upload that needs more blob uploads than this says how many before it starts. */
export const LFS_BLOB_NOTICE = BLOB_UPLOAD_NOTICE;

/**
 * Blob uploads of one LFS object in flight at once: as many as a pack's upload runs. Enough that
 * one blob's bytes go while another's answer comes back; few enough that a burst stays far inside
 * the PDS's rate limit on requests (the reference PDS allows 3,000 per five minutes from one
 * address, and a 429 costs the object a wait). The record is still written once per blob, as
 * before, so the writes charged to the account's budget (2 points each) do not grow.
 */
export const LFS_PARALLEL = 4;

/** Where LFS transfers keep their temporary files, and (downloads) which blobs they keep. */
export interface LfsEnv {
  cache: BlobCache;
  cacheDir: string;
  /** One line for the user (stderr). */
  say: (line: string) => void;
  /**
   * Where the line goes that an upload needs more blob uploads than the PDS says are left (see
   * UploadBudgetWatch): said at most once an object; nowhere when absent.
   */
  sayBudget?: (line: string) => void;
}

/** Bytes of the object per blob: under the PDS's blob limit, less what sealing adds for a private repository. */
function chunkFor(limit: number, sealed: boolean): number {
  return sealed ? limit - (sealedPackSize(limit) - limit) : limit;
}

/** The record key of `oid` in `remote`: a keyed hash for a private repository. */
function keyOf(remote: RemoteRepo, oid: string): string {
  return remote.sealer?.refKey(`lfs/${oid}`) ?? lfsKey(remote.name, oid);
}

/** Sealing adds at most this to a blob of `chunk` bytes. */
function overheadOf(remote: RemoteRepo, chunk: number): number {
  return remote.sealer === undefined ? 0 : sealedPackSize(chunk) - chunk;
}

/** The object's record and its CID, or undefined when there is none. */
async function readRecord(
  remote: RemoteRepo,
  key: string,
): Promise<{ cid: string; record: LfsRecord } | undefined> {
  let res: { cid: string; value: unknown };
  try {
    res = await remote.reader.query<{ cid: string; value: unknown }>(
      'com.atproto.repo.getRecord',
      { repo: remote.owner.did, collection: LFS_COLLECTION, rkey: key },
      RECORD_ANSWER_BYTES,
    );
  } catch (err) {
    if (err instanceof XrpcError && pdsRefusal(err) === 'record-missing') return undefined;
    throw generalFailure(err, `reading an LFS object of ${remote.label}`);
  }
  const chunk = (res.value as { chunk?: unknown } | null)?.chunk;
  const record = parseLfsRecord(res.value, typeof chunk === 'number' ? overheadOf(remote, chunk) : 0);
  if (record.repo !== remote.name)
    throw new KnotlessError(
      'corrupt-remote',
      `An LFS record of ${remote.label} names another repository; push the object again.`,
    );
  return { cid: res.cid, record };
}

/**
 * What an upload of `size` bytes will cost in blob uploads, at the PDS's blob limit (read once from
 * describeServer, cached a day). Counted over every object of a push to say it once.
 */
export async function lfsBlobsNeeded(remote: RemoteRepo, auth: Authorizer, env: LfsEnv, size: number) {
  await remote.prepare();
  const limit = await blobUploadLimit(remote.writer(auth), env.cacheDir);
  return lfsBlobCount(size, chunkFor(limit, remote.isPrivate));
}

/**
 * Stores the LFS object `oid` (`size` bytes, in the file `file`) in the repository: its blobs, each
 * at most the PDS's blob limit (encrypted, each on its own, for a private repository), up to
 * {@link LFS_PARALLEL} at once, and the record listing them in order, written again as each blob
 * lands after all before it, so the PDS keeps what is uploaded and an interrupted upload resumes
 * after the last blob the record lists. An object whose record is
 * complete is not sent again. `onBytes` is told of the object's bytes as they are done (a resumed
 * upload's first call covers the blobs it skipped). Answers how many blobs were uploaded.
 */
export async function uploadLfsObject(
  remote: RemoteRepo,
  auth: Authorizer,
  env: LfsEnv,
  object: { oid: string; size: number; file: string },
  onBytes: (n: number) => void,
): Promise<number> {
  await remote.prepare();
  const writer = remote.writer(auth);
  const sealer = remote.sealer;
  const key = keyOf(remote, object.oid);
  const found = await readRecord(remote, key);
  const limit = await blobUploadLimit(writer, env.cacheDir);
  let chunk = chunkFor(limit, sealer !== undefined);
  let record: LfsRecord;
  let swap: string | null;
  // A record of the same object, made the same way, is resumed; anything else is started again.
  if (
    found !== undefined &&
    found.record.size === object.size &&
    (sealer === undefined ? found.record.oid === object.oid : found.record.epoch === sealer.epoch) &&
    found.record.blobs.every((b) => b.size <= limit)
  ) {
    record = found.record;
    chunk = record.chunk;
    swap = found.cid;
  } else {
    record = {
      repo: remote.name,
      ...(sealer === undefined ? { oid: object.oid } : {}),
      size: object.size,
      chunk,
      blobs: [],
      createdAt: new Date().toISOString(),
    };
    swap = found?.cid ?? null;
  }
  const total = lfsBlobCount(object.size, chunk);
  if (total > MAX_LFS_BLOBS)
    throw new KnotlessError(
      'too-large',
      `LFS object ${object.oid} needs ${total} blobs at this PDS's limit of ${limit} bytes, over the ${MAX_LFS_BLOBS} a record may list; it cannot be stored there.`,
    );
  const skipped = Math.min(object.size, record.blobs.length * chunk);
  if (skipped > 0) onBytes(skipped);
  const notes = new LandedNotes(env.cacheDir, remote, key, chunk, object.size);
  if (record.blobs.length === total) {
    notes.forget();
    return 0;
  }
  // What is still to send: neither listed by the record nor noted as landed (those are listed as
  // they are, below). Checked against the PDS's budget now and as each upload's answer comes back.
  let toSend = 0;
  for (let i = record.blobs.length; i < total; i++) if (notes.get(i, sealer?.epoch) === undefined) toSend++;
  const say = env.sayBudget;
  const budget =
    say === undefined
      ? undefined
      : new UploadBudgetWatch(`LFS object ${object.oid.slice(0, 12)}`, () => writer.uploadBudget(), say);
  const landedOne = () => budget?.check(--toSend);
  budget?.check(toSend);
  const fd = fs.openSync(object.file, 'r');
  const file = PackFile.fromFds([{ fd, size: fs.fstatSync(fd).size }]);
  const lengthOf = (i: number) => Math.min(chunk, object.size - i * chunk);
  // Blobs that landed but are not listed yet (one before them is still on its way), by index.
  const landed = new Map<number, Awaited<ReturnType<typeof uploadPart>>>();
  let next = record.blobs.length;
  let sent = 0;
  let failure: { err: unknown } | undefined;
  // The record lists blobs in order, each written once its blob and all before it have landed: an
  // upload that stops resumes after the last one listed. One write at a time (each swaps the last).
  let listing: Promise<void> = Promise.resolve();
  const list = async (i: number, blob: { ref: BlobRef; epoch: number | undefined }) => {
    record = {
      ...record,
      blobs: [...record.blobs, blob.ref],
      ...(blob.epoch === undefined ? {} : { epoch: blob.epoch }),
    };
    swap = await putRecord(remote, auth, key, record, swap);
    crashPoint('lfs:blob-listed');
    onBytes(lengthOf(i));
  };
  const listLanded = () =>
    (listing = listing.then(async () => {
      for (
        let blob = landed.get(record.blobs.length);
        blob !== undefined;
        blob = landed.get(record.blobs.length)
      ) {
        const i = record.blobs.length;
        landed.delete(i);
        await list(i, blob);
      }
    }));
  // Each worker takes the next blob until none is left or one failed; the ones in flight then still
  // land and are listed where they follow on, so that a retry sends only what the record lacks.
  const worker = async () => {
    while (failure === undefined && next < total) {
      const i = next++;
      try {
        const blob = await uploadPart(remote, auth, env, file, i * chunk, lengthOf(i), object.oid);
        notes.note(i, blob.ref, blob.epoch);
        crashPoint('lfs:blob-landed');
        landed.set(i, blob);
        sent++;
        landedOne();
        await listLanded();
      } catch (err) {
        failure ??= { err };
      }
    }
  };
  try {
    if (file.length !== object.size)
      throw new KnotlessError(
        'usage',
        `LFS object ${object.oid} is ${file.length} bytes on disk, not the ${object.size} git-lfs said; run \`git lfs fsck\`.`,
      );
    // Blobs that landed before the upload stopped are listed first, in order, each in one write as
    // it would have been; one missing between them is sent then. A blob the PDS no longer holds
    // ends this: it and the rest are sent as usual.
    const epoch = sealer?.epoch;
    while (notes.any(record.blobs.length) && record.blobs.length < total) {
      const i = record.blobs.length;
      const ref = notes.get(i, epoch);
      if (ref === undefined) {
        const blob = await uploadPart(remote, auth, env, file, i * chunk, lengthOf(i), object.oid);
        notes.note(i, blob.ref, blob.epoch);
        crashPoint('lfs:blob-landed');
        sent++;
        landedOne();
        await list(i, blob);
      } else {
        const listed = {
          ...record,
          blobs: [...record.blobs, ref],
          ...(epoch === undefined ? {} : { epoch }),
        };
        const cid = await putRecord(remote, auth, key, listed, swap, true);
        if (cid === undefined) break;
        record = listed;
        swap = cid;
        crashPoint('lfs:blob-listed');
        onBytes(lengthOf(i));
      }
    }
    next = record.blobs.length;
    await Promise.all(Array.from({ length: Math.min(LFS_PARALLEL, total - next) }, worker));
    if (failure !== undefined) throw failure.err;
    notes.forget();
  } finally {
    file.close();
  }
  return sent;
}

/** Uploads bytes [at, at+length) of the object as one blob, sealed first for a private repository. */
async function uploadPart(
  remote: RemoteRepo,
  auth: Authorizer,
  env: LfsEnv,
  file: PackFile,
  at: number,
  length: number,
  oid: string,
) {
  const writer = remote.writer(auth);
  const what = `uploading LFS object ${oid}`;
  const sealer = remote.sealer;
  if (sealer === undefined) {
    const body = { length, open: () => file.chunks(at, length, 64 * 1024) };
    return { ref: await uploadBlob(writer, body, what), epoch: undefined };
  }
  // sealPack reads a whole file: the part is copied to one first, so memory stays a few buffers.
  const part = tempFile(env.cache.tempDir, 'lfs-part');
  const plain = PackFile.fromFds([{ fd: part.fd, size: length }], [part.path]);
  try {
    let written = 0;
    for await (const piece of file.chunks(at, length)) {
      fs.writeSync(part.fd, piece, 0, piece.length, written);
      written += piece.length;
    }
    const sealed = await sealer.sealPack(plain, env.cache.tempDir);
    try {
      const body = {
        length: sealed.file.length,
        open: () => sealed.file.chunks(0, sealed.file.length, 64 * 1024),
      };
      return { ref: await uploadBlob(writer, body, what), epoch: sealed.epoch };
    } finally {
      sealed.file.close();
    }
  } finally {
    plain.close();
  }
}

/**
 * The blobs of one object's upload that the PDS took, by index, noted on this machine as each
 * answer arrives (before the record lists it): the record lists blobs in order and one write at a
 * time, so a kill can leave blobs that landed unlisted, behind a slower one or a write under way. A
 * resumed upload lists them from here instead of sending them again, while the PDS keeps blobs no
 * record lists yet (it drops them after a while, and the write then says so: they are sent again).
 */
class LandedNotes {
  readonly #file: string;
  readonly #notes: { chunk: number; size: number; blobs: Record<string, { ref: BlobRef; epoch?: number }> };

  constructor(cacheDir: string, remote: RemoteRepo, key: string, chunk: number, size: number) {
    const name = crypto.createHash('sha256').update(`${remote.owner.did}\0${key}`).digest('hex');
    this.#file = path.join(cacheDir, 'lfs-landed', `${name}.json`);
    this.#notes = { chunk, size, blobs: {} };
    // None (the usual case), or another object's or upload's: every blob the record lacks is sent.
    const r = readJson<{ chunk?: unknown; size?: unknown; blobs?: unknown } | null>(this.#file);
    if (
      r === undefined ||
      r === null ||
      r.chunk !== chunk ||
      r.size !== size ||
      typeof r.blobs !== 'object' ||
      r.blobs === null
    )
      return;
    for (const [i, v] of Object.entries(r.blobs as Record<string, unknown>)) {
      const note = v as { ref?: unknown; epoch?: unknown } | null;
      try {
        const ref = parseBlobRef(note?.ref, (m) => new Error(m));
        if (ref.size > chunk + 1024 * 1024 || !/^\d+$/.test(i)) continue;
        this.#notes.blobs[i] = { ref, ...(typeof note?.epoch === 'number' ? { epoch: note.epoch } : {}) };
      } catch (err) {
        if (!(err instanceof Error)) throw err;
        // A note that is not a blob reference is passed over: that blob is sent again.
      }
    }
  }

  /** The blob the PDS took for index `i`, sealed at `epoch` (a private repository's), if noted. */
  get(i: number, epoch: number | undefined): BlobRef | undefined {
    const note = this.#notes.blobs[String(i)];
    return note !== undefined && note.epoch === epoch ? note.ref : undefined;
  }

  /** Whether a blob at index `i` or after is noted. */
  any(from: number): boolean {
    return Object.keys(this.#notes.blobs).some((i) => Number(i) >= from);
  }

  note(i: number, ref: BlobRef, epoch: number | undefined): void {
    this.#notes.blobs[String(i)] = { ref, ...(epoch === undefined ? {} : { epoch }) };
    writeFileAtomic(this.#file, JSON.stringify(this.#notes));
  }

  forget(): void {
    fs.rmSync(this.#file, { force: true });
  }
}

/**
 * Writes the record if its current CID is `swap`; returns the new CID. With `noted` (the record
 * lists a blob noted on this machine, not uploaded by this process), a PDS that no longer holds a
 * blob it lists answers undefined.
 */
async function putRecord(
  remote: RemoteRepo,
  auth: Authorizer,
  key: string,
  record: LfsRecord,
  swap: string | null,
): Promise<string>;
async function putRecord(
  remote: RemoteRepo,
  auth: Authorizer,
  key: string,
  record: LfsRecord,
  swap: string | null,
  noted: true,
): Promise<string | undefined>;
async function putRecord(
  remote: RemoteRepo,
  auth: Authorizer,
  key: string,
  record: LfsRecord,
  swap: string | null,
  noted = false,
): Promise<string | undefined> {
  try {
    const res = await remote.writer(auth).procedure<{ cid: string }>('com.atproto.repo.putRecord', {
      repo: remote.owner.did,
      collection: LFS_COLLECTION,
      rkey: key,
      record: writeLfsRecord(record),
      swapRecord: swap,
    });
    return res.cid;
  } catch (err) {
    if (noted && err instanceof XrpcError && pdsRefusal(err) === 'blob-missing') return undefined;
    if (err instanceof XrpcError && pdsRefusal(err) === 'swap-conflict')
      throw new KnotlessError(
        'remote-changed',
        `Another upload of the same LFS object to ${remote.label} wrote its record meanwhile; push again.`,
        { cause: err },
      );
    throw generalFailure(err, `writing an LFS record of ${remote.label}`);
  }
}

/**
 * Downloads the LFS object `oid` into a new file under `dir` and returns its path: each blob checked
 * against its CID as it arrives, opened for a private repository, and the whole object checked
 * against its size and its SHA-256 before the path is given. The blobs are not kept in the cache
 * (git-lfs keeps the object). `onBytes` is told of the object's bytes as they land.
 */
export async function downloadLfsObject(
  remote: RemoteRepo,
  env: LfsEnv,
  object: { oid: string; size: number },
  dir: string,
  onBytes: (n: number) => void,
): Promise<string> {
  const missing = () =>
    new KnotlessError(
      'not-found',
      `${remote.label} has no LFS object ${object.oid}; push it from a clone that has it (\`git lfs push --all origin\`).`,
    );
  // The privacy of the repository is settled before the key is chosen.
  if (!(await remote.exists())) throw missing();
  const found = await readRecord(remote, keyOf(remote, object.oid));
  if (found === undefined || !lfsComplete(found.record)) throw missing();
  const record = found.record;
  const sealer = remote.sealer;
  if (sealer === undefined ? record.oid !== object.oid : record.epoch === undefined)
    throw new KnotlessError(
      'corrupt-remote',
      `The LFS record of ${object.oid} in ${remote.label} is not that object's; push it again.`,
    );
  if (record.size !== object.size)
    throw new KnotlessError(
      'corrupt-remote',
      `${remote.label} holds LFS object ${object.oid} as ${record.size} bytes, not the ${object.size} its pointer says; nothing was written.`,
    );
  const out = tempFile(dir, `lfs-${object.oid.slice(0, 12)}`);
  const hash = crypto.createHash('sha256');
  let at = 0;
  let done = false;
  try {
    const what = `LFS object ${object.oid}`;
    for (const blob of record.blobs) {
      const got = await downloadBlob(
        remote.reader,
        remote.owner.did,
        what,
        blob.ref.$link,
        blob.size,
        env.cache,
        false,
      );
      let part = PackFile.fromFds([got]);
      try {
        if (sealer !== undefined) {
          const opened = await sealer.openPack(part, record.epoch!, env.cache.tempDir, what);
          part.close();
          part = opened;
        }
        const expected = Math.min(record.chunk, object.size - at);
        if (part.length !== expected)
          throw new KnotlessError(
            'corrupt-remote',
            `A blob of ${what} in ${remote.label} holds ${part.length} bytes, not ${expected}; nothing was written.`,
          );
        for await (const piece of part.chunks(0, part.length, READ_CHUNK)) {
          hash.update(piece);
          fs.writeSync(out.fd, piece, 0, piece.length, at);
          at += piece.length;
          onBytes(piece.length);
        }
      } finally {
        part.close();
      }
    }
    if (at !== object.size || hash.digest('hex') !== object.oid)
      throw new KnotlessError(
        'corrupt-remote',
        `LFS object ${object.oid} from ${remote.label} does not match its SHA-256; nothing was written.`,
      );
    done = true;
    return out.path;
  } finally {
    fs.closeSync(out.fd);
    if (!done) fs.rmSync(out.path, { force: true });
  }
}

/** The name git-lfs knows knotless's transfer agent by (`lfs.customtransfer.<name>`). */
export const LFS_AGENT = 'knotless';

/**
 * The git settings that make git-lfs move a repository's LFS objects through `program` (the
 * `knotless` executable) as a standalone transfer agent: no LFS server is asked anything. One
 * process per transfer (`concurrent` false): it keeps one session and one record per object.
 */
export function lfsSettings(program: string): Array<[string, string]> {
  return [
    [`lfs.customtransfer.${LFS_AGENT}.path`, program],
    [`lfs.customtransfer.${LFS_AGENT}.args`, 'lfs transfer'],
    [`lfs.customtransfer.${LFS_AGENT}.concurrent`, 'false'],
    ['lfs.standalonetransferagent', LFS_AGENT],
    // git-lfs reads a knotless:// URL as ssh's host:path and would try `ssh knotless` first; an
    // endpoint that names no server (.invalid never resolves), whose locking it never asks, stops it.
    ['lfs.url', LFS_NO_SERVER],
    [`lfs.${LFS_NO_SERVER}.locksverify`, 'false'],
  ];
}

/** The LFS endpoint git-lfs is given: no server, since the transfer agent does everything. */
export const LFS_NO_SERVER = 'https://knotless.invalid/';

/** Writes {@link lfsSettings} into the repository's own config (`gitDir`, else the one git finds). */
export async function installLfsSettings(program: string, gitDir?: string): Promise<void> {
  for (const [name, value] of lfsSettings(program))
    await runGit(['config', '--local', name, value], gitDir === undefined ? {} : { gitDir });
}

/**
 * {@link installLfsSettings}, unless the repository already names a standalone transfer agent or an
 * LFS server (ours, or ones its user chose: they are left alone): a fetch through the helper, a
 * clone's first, sets git-lfs up, so that the checkout that follows it finds the LFS objects.
 */
export async function ensureLfsSettings(program: string, gitDir: string): Promise<void> {
  const { code } = await runGit(['config', '--get-regexp', '^lfs\\.(standalonetransferagent|url)$'], {
    gitDir,
    okCodes: [1],
  });
  if (code === 1) await installLfsSettings(program, gitDir);
}
