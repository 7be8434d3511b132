import type http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { PDS, envToCfg, envToSecrets } from '@atproto/pds';
import { listenLoopback } from './http.ts';

/** Secrets a dev PDS keeps across restarts, so its DIDs' keys and issued tokens stay valid. */
export interface PdsSecrets {
  jwtSecret: string;
  adminPassword: string;
  plcRotationKeyHex: string;
  recoveryDidKey: string;
}

/** A running reference PDS. */
export interface Pds {
  url: string;
  port: number;
  /** The PDS's service DID (`did:web:localhost%3A<port>`): what service-auth tokens are addressed to. */
  did: string;
  /** Where its data lives: its account database (`account.sqlite`) and actor stores. */
  dataDir: string;
  adminPassword: string;
  /** Its HTTP server, in this process: tests watch who sends it what (socket-owner.ts). */
  server: http.Server;
  close(): Promise<void>;
}

/** Options for {@link startPds}. */
export interface PdsOptions {
  port: number;
  dir: string;
  plcUrl: string;
  secrets: PdsSecrets;
  /** Turns on the PDS's own rate limits, as real deployments run. */
  rateLimits?: boolean;
  blobUploadLimit?: number;
}

/**
 * Where a dev PDS on `port` with its files in `dir` answers, its service DID and its data directory:
 * derived here only, for the PDS itself and for commands that act on a running network.
 */
export function pdsPlace(port: number, dir: string): { url: string; did: string; dataDir: string } {
  return {
    url: `http://localhost:${port}`,
    // Each PDS of the network has its own service DID, as real ones do: a service-auth token made for
    // one (the `aud` of an account migration's createAccount) is refused by another.
    did: `did:web:localhost%3A${port}`,
    dataDir: path.join(dir, 'pds'),
  };
}

/** Starts the reference PDS on 127.0.0.1:port with its data in `dir`. */
export async function startPds(opts: PdsOptions): Promise<Pds> {
  const place = pdsPlace(opts.port, opts.dir);
  const dataDirectory = place.dataDir;
  const blobstoreDiskLocation = path.join(opts.dir, 'blobs');
  fs.mkdirSync(dataDirectory, { recursive: true });
  fs.mkdirSync(blobstoreDiskLocation, { recursive: true });
  // No entryway is configured, so the PDS runs its own OAuth provider (issuer = its public URL);
  // devMode lets that issuer be plain http on localhost. knotless's OAuth tests sign in through it.
  const env = {
    devMode: true,
    serviceDid: place.did,
    port: opts.port,
    hostname: 'localhost',
    dataDirectory,
    blobstoreDiskLocation,
    didPlcUrl: opts.plcUrl,
    recoveryDidKey: opts.secrets.recoveryDidKey,
    adminPassword: opts.secrets.adminPassword,
    jwtSecret: opts.secrets.jwtSecret,
    plcRotationKeyK256PrivateKeyHex: opts.secrets.plcRotationKeyHex,
    serviceHandleDomains: ['.test'],
    inviteRequired: false,
    disableSsrfProtection: true,
    rateLimitsEnabled: opts.rateLimits ?? false,
    serviceName: 'knotless dev PDS',
    ...(opts.blobUploadLimit === undefined ? {} : { blobUploadLimit: opts.blobUploadLimit }),
  };
  const pds = await PDS.create(envToCfg(env), envToSecrets(env));
  // PDS.start() would listen on every interface; do its two steps ourselves, on loopback.
  await pds.ctx.sequencer.start();
  let listening: Awaited<ReturnType<typeof listenLoopback>>;
  try {
    listening = await listenLoopback(pds.app, opts.port);
  } catch (err) {
    // The context holds databases, the sequencer and timers: left open, they keep the process alive
    // after the caller has given up on this PDS.
    await pds.ctx.destroy();
    throw err;
  }
  return {
    url: place.url,
    port: opts.port,
    did: place.did,
    dataDir: dataDirectory,
    adminPassword: opts.secrets.adminPassword,
    server: listening.server,
    close: async () => {
      await listening.close();
      await pds.ctx.destroy();
    },
  };
}
