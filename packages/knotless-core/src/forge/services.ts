import type { Authorizer, XrpcClient } from '../xrpc/client.ts';

/**
 * What the forge's operations are handed by their front end (the CLI's `Context`, the appview's
 * site): a way to make XRPC clients, and where the caches live. They build nothing else themselves.
 */
export interface ForgeServices {
  client(service: string, authorizer?: Authorizer): XrpcClient;
  config: {
    /** The blob cache, mirrors and scratch files of merges and rounds live here. */
    cacheDir: string;
    /** The largest object a pack may inflate to (decompression bombs). */
    maxObjectBytes: number;
    /** Whether a merge writes the structure and the blobs as two packs; undefined: yes (KNOTLESS_PACK_SPLIT). */
    packSplit?: boolean;
  };
}
