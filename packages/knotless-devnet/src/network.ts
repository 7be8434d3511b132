import type http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Secp256k1Keypair } from '@atproto/crypto';
import { startPds, type Pds, type PdsSecrets } from './pds.ts';
import { startPlc, type Plc } from './plc.ts';
import { freePort, portInUse } from './ports.ts';
import { holdPrivateUmask, makePrivate } from './private.ts';

/** What a network directory remembers between runs: the ports its DIDs name and the PDS's keys. */
interface NetworkState {
  version: 1;
  plcPort: number;
  pdsPort: number;
  secrets: PdsSecrets;
}

/** An account on the local network. */
export interface Account {
  did: string;
  handle: string;
}

/** A running local atproto network: one PLC directory and one reference PDS. */
export interface Network {
  dir: string;
  plcUrl: string;
  pdsUrl: string;
  adminPassword: string;
  /** The PDS's HTTP server, in this process (see watchRequests). */
  pdsServer: http.Server;
  /** Creates an account, or returns the existing one when the handle is taken by it already. */
  ensureAccount(handle: string, password: string): Promise<Account & { created: boolean }>;
  close(): Promise<void>;
}

/** Options for {@link startNetwork}. */
export interface NetworkOptions {
  /** Where data lives; reused on the next start. Without it a temporary directory is removed on close. */
  dir?: string;
  rateLimits?: boolean;
  blobUploadLimit?: number;
  /**
   * Narrow this process's umask to 0077 while the network runs, so that everything the PDS creates
   * later (actor folders and keys at account creation, databases' WAL files) is private too. The
   * umask is process-wide and inherited by child processes, so only a process whose job is the
   * network (`knotless dev`) asks for it; a test process would hand it to every git it runs. Without
   * it the directory itself is still 0700 (nothing inside is reachable by others) and tightened at start.
   */
  privateFiles?: boolean;
}

/** Thrown when the network cannot start for a reason the user can fix. */
export class NetworkError extends Error {
  override name = 'NetworkError';
}

async function newState(): Promise<NetworkState> {
  const rotation = await Secp256k1Keypair.create({ exportable: true });
  const recovery = await Secp256k1Keypair.create();
  return {
    version: 1,
    plcPort: await freePort(),
    pdsPort: await freePort(),
    secrets: {
      jwtSecret: crypto.randomBytes(32).toString('hex'),
      adminPassword: crypto.randomBytes(16).toString('hex'),
      plcRotationKeyHex: Buffer.from(await rotation.export()).toString('hex'),
      recoveryDidKey: recovery.did(),
    },
  };
}

function loadOrCreateState(file: string): Promise<NetworkState> | NetworkState {
  if (!fs.existsSync(file)) return newState();
  const state = JSON.parse(fs.readFileSync(file, 'utf8')) as NetworkState;
  if (state.version !== 1)
    throw new NetworkError(`${file} has an unknown version; remove its directory to start afresh.`);
  return state;
}

/** Takes DIR/network.pid, refusing when a live process holds it. */
function takePidLock(dir: string): () => void {
  const file = path.join(dir, 'network.pid');
  try {
    const pid = Number(fs.readFileSync(file, 'utf8'));
    if (pid > 0 && pid !== process.pid) {
      try {
        process.kill(pid, 0);
        throw new NetworkError(`A network is already running in ${dir} (process ${pid}); stop it first.`);
      } catch (err) {
        if (err instanceof NetworkError) throw err;
      }
    }
  } catch (err) {
    if (err instanceof NetworkError) throw err;
  }
  fs.writeFileSync(file, String(process.pid));
  return () => fs.rmSync(file, { force: true });
}

/** Starts a PLC directory and a PDS on loopback; a restart on the same directory keeps ports, DIDs and accounts. */
export async function startNetwork(opts: NetworkOptions = {}): Promise<Network> {
  const temporary = opts.dir === undefined;
  const dir = opts.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-net-'));
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    // The user's --dir: a path through a file, or somewhere not writable, is theirs to change.
    const code = (err as NodeJS.ErrnoException).code;
    if (code === undefined) throw err;
    throw new NetworkError(`Could not make the directory ${dir} (${code}); choose another --dir.`, {
      cause: err,
    });
  }
  const lock = takePidLock(dir);
  const releaseUmask = opts.privateFiles === true ? holdPrivateUmask() : () => {};
  const releaseLock = (): void => {
    lock();
    releaseUmask();
  };
  try {
    makePrivate(dir);
  } catch (err) {
    releaseLock();
    throw err;
  }
  const stateFile = path.join(dir, 'network.json');
  const state = await loadOrCreateState(stateFile);
  for (const port of [state.plcPort, state.pdsPort]) {
    if (await portInUse(port)) {
      releaseLock();
      throw new NetworkError(
        `Port ${port}, which this network's DIDs name, is in use by another program; free it, or remove ${dir} to start afresh.`,
      );
    }
  }
  fs.writeFileSync(stateFile, JSON.stringify(state, null, 2), { mode: 0o600 });

  let plc: Plc | undefined;
  let pds: Pds | undefined;
  try {
    plc = await startPlc({ port: state.plcPort, dir });
    pds = await startPds({
      port: state.pdsPort,
      dir,
      plcUrl: plc.url,
      secrets: state.secrets,
      ...(opts.rateLimits === undefined ? {} : { rateLimits: opts.rateLimits }),
      ...(opts.blobUploadLimit === undefined ? {} : { blobUploadLimit: opts.blobUploadLimit }),
    });
  } catch (err) {
    await pds?.close();
    await plc?.close();
    releaseLock();
    throw err;
  }
  const pdsUrl = pds.url;
  const running = { plc, pds };

  return {
    dir,
    plcUrl: plc.url,
    pdsUrl,
    adminPassword: state.secrets.adminPassword,
    pdsServer: pds.server,
    ensureAccount: (handle, password) => ensureAccount(pdsUrl, handle, password),
    close: async () => {
      await running.pds.close();
      await running.plc.close();
      releaseLock();
      if (temporary) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function xrpc(pdsUrl: string, nsid: string, init?: { body: unknown }): Promise<Response> {
  return fetch(`${pdsUrl}/xrpc/${nsid}`, {
    method: init === undefined ? 'GET' : 'POST',
    ...(init === undefined
      ? {}
      : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(init.body) }),
  });
}

async function ensureAccount(
  pdsUrl: string,
  handle: string,
  password: string,
): Promise<Account & { created: boolean }> {
  const found = await xrpc(pdsUrl, `com.atproto.identity.resolveHandle?handle=${encodeURIComponent(handle)}`);
  if (found.ok) {
    const { did } = (await found.json()) as { did: string };
    return { did, handle, created: false };
  }
  const res = await xrpc(pdsUrl, 'com.atproto.server.createAccount', {
    body: { handle, password, email: `${handle}@knotless.invalid` },
  });
  if (!res.ok) throw new NetworkError(`creating ${handle} failed: ${res.status} ${await res.text()}`);
  const { did } = (await res.json()) as { did: string };
  return { did, handle, created: true };
}
