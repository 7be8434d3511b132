import { BlobCache } from 'knotless-core/cache/blob-cache';
import { KnotlessError } from 'knotless-core/errors';
import { gitDir } from 'knotless-core/git/objects';
import { ensureLfsSettings } from 'knotless-core/ops/lfs';
import { MirrorUploadPack } from 'knotless-core/ops/upload';
import { BIN_SCRIPTS } from '../paths.ts';
import type { HelperIo } from './protocol.ts';
import type { HelperState } from './state.ts';

/** The pkt-line git ends a request with (flush), and the one a helper ends each answer with. */
const FLUSH = '0000';
const RESPONSE_END = Buffer.from('0002');

/**
 * Runs a `stateless-connect git-upload-pack` session (gitremote-helpers(7)): git speaks protocol v2 to
 * upload-pack, one request at a time, and this helper carries each to git's own upload-pack over the
 * repository's mirror (ops/upload.ts). The framing is written here, not by git, because a helper is the
 * "server" of a stateless connection: it must find where each request ends (its flush packet) to run
 * one upload-pack per request, and end each answer with the response-end packet (0002) git waits for.
 * Nothing else of the protocol is read or made here: git speaks it at both ends.
 */
export async function statelessConnect(state: HelperState, io: HelperIo): Promise<void> {
  const remote = await state.remote();
  const { config } = state.ctx;
  const refs = state.refs ?? (await state.list(false));
  // As a plain fetch does (fetch.ts): the checkout after a shallow clone needs git-lfs set up.
  await ensureLfsSettings(BIN_SCRIPTS['knotless']!, await gitDir());
  const upload = await MirrorUploadPack.open({
    remote,
    cacheDir: config.cacheDir,
    cache: new BlobCache(config.cacheDir),
    refs,
    relist: () => state.list(false),
    maxObjectBytes: config.maxObjectBytes,
  });
  io.answer(['']);
  await upload.advertise(io.write);
  const requests = new PacketRequests(io.reader.bytes);
  for (;;) {
    const request = await requests.next();
    if (request === undefined) return;
    await upload.answer(request, io.write);
    io.write(RESPONSE_END);
  }
}

/** Splits git's bytes into requests, each up to and including a flush packet. */
class PacketRequests {
  readonly #pull: () => Promise<Uint8Array | undefined>;
  #buffer = Buffer.alloc(0);

  constructor(pull: () => Promise<Uint8Array | undefined>) {
    this.#pull = pull;
  }

  /** The next request, or undefined when git closed the connection between requests. */
  async next(): Promise<Buffer | undefined> {
    let at = 0;
    for (;;) {
      while (at + 4 <= this.#buffer.length) {
        const head = this.#buffer.subarray(at, at + 4).toString('latin1');
        if (!/^[0-9a-f]{4}$/.test(head))
          throw new KnotlessError(
            'usage',
            `git sent a malformed packet ("${head.replace(/[^ -~]/g, '?')}").`,
          );
        const len = parseInt(head, 16);
        // 0000 flush ends a request; 0001 delim and 0002 are four bytes alone.
        const size = len < 4 ? 4 : len;
        if (at + size > this.#buffer.length) break;
        at += size;
        if (head === FLUSH) {
          const request = this.#buffer.subarray(0, at);
          this.#buffer = this.#buffer.subarray(at);
          return request;
        }
      }
      const piece = await this.#pull();
      if (piece === undefined) {
        if (this.#buffer.length === 0) return undefined;
        throw new KnotlessError(
          'usage',
          'git closed the connection in the middle of a request; run the command again.',
        );
      }
      this.#buffer = Buffer.concat([this.#buffer, piece]);
    }
  }
}
