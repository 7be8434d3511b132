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

/** One PDS's lasting part: the port its accounts' DIDs name and its keys. */
interface PdsState {
  port: number;
  secrets: PdsSecrets;
}

/** What a network directory remembers between runs: the ports its DIDs name and each PDS's keys. */
export interface NetworkState {
  version: 2;
  plcPort: number;
  pdses: PdsState[];
}

/** Version 1: one PDS, kept as the first of version 2's list. */
interface NetworkStateV1 {
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

/** One PDS of the network, as its users and its operator see it. */
export interface NetworkPds {
  url: string;
  /** Its service DID (`did:web:…`), the audience of service-auth tokens made for it. */
  did: string;
  /** Its data directory: `account.sqlite` (accounts, email tokens) and the actor stores. */
  dataDir: string;
  adminPassword: string;
}

/**
 * A running local atproto network: one PLC directory and one or more reference PDSes on it. Code
 * that follows the whole network (an appview, a relay stand-in) iterates over `pdses`.
 */
export interface Network {
  dir: string;
  plcUrl: string;
  /** The first PDS: where accounts go unless told otherwise. */
  pdsUrl: string;
  pdses: NetworkPds[];
  /** The first PDS's admin password. */
  adminPassword: string;
  /** The first PDS's HTTP server, in this process (see watchRequests). */
  pdsServer: http.Server;
  /**
   * Creates an account on the PDS numbered `pds` (0, the first, by default), or returns the existing
   * one when the handle is taken by it already, wherever it lives.
   */
  ensureAccount(handle: string, password: string, pds?: number): Promise<Account & { created: boolean }>;
  /** The PDS an account's DID document names now (it changes when the account moves). */
  pdsOf(did: string): Promise<NetworkPds>;
  close(): Promise<void>;
}

/** Options for {@link startNetwork}. */
export interface NetworkOptions {
  /** Where data lives; reused on the next start. Without it a temporary directory is removed on close. */
  dir?: string;
  rateLimits?: boolean;
  blobUploadLimit?: number;
  /** How many PDSes to run (1 by default); a directory that ran more before keeps running them. */
  pdses?: number;
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

/** A port the network's state names was taken by another program. */
export class PortTaken extends NetworkError {
  constructor(port: number, dir: string, options?: ErrorOptions) {
    super(
      `Port ${port}, which this network's DIDs name, is in use by another program; free it, or remove ${dir} to start afresh.`,
      options,
    );
  }
}

/** How many times a temporary network takes new ports when another program took one first. */
const TEMPORARY_ATTEMPTS = 5;

async function newPdsState(): Promise<PdsState> {
  const rotation = await Secp256k1Keypair.create({ exportable: true });
  const recovery = await Secp256k1Keypair.create();
  return {
    port: await freePort(),
    secrets: {
      jwtSecret: crypto.randomBytes(32).toString('hex'),
      adminPassword: crypto.randomBytes(16).toString('hex'),
      plcRotationKeyHex: Buffer.from(await rotation.export()).toString('hex'),
      recoveryDidKey: recovery.did(),
    },
  };
}

/** The directory's state as written, upgraded to version 2; undefined when there is none. */
export function readState(file: string): NetworkState | undefined {
  if (!fs.existsSync(file)) return undefined;
  const read = JSON.parse(fs.readFileSync(file, 'utf8')) as NetworkState | NetworkStateV1;
  if (read.version === 1)
    return { version: 2, plcPort: read.plcPort, pdses: [{ port: read.pdsPort, secrets: read.secrets }] };
  if (read.version === 2) return read;
  throw new NetworkError(`${file} has an unknown version; remove its directory to start afresh.`);
}

/** The directory's state (made or upgraded), with at least `pdses` PDSes. */
async function loadOrCreateState(file: string, pdses: number): Promise<NetworkState> {
  const state = readState(file) ?? { version: 2, plcPort: await freePort(), pdses: [] };
  while (state.pdses.length < pdses) state.pdses.push(await newPdsState());
  return state;
}

/** Where the PDS numbered `i` keeps its data: the first in DIR itself (as before there were more), others in DIR/pdsN. */
export function pdsDir(dir: string, i: number): string {
  return i === 0 ? dir : path.join(dir, `pds${i + 1}`);
}

/** The process running the network in `dir`, when one is alive. */
export function runningPid(dir: string): number | undefined {
  let pid: number;
  try {
    pid = Number(fs.readFileSync(path.join(dir, 'network.pid'), 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  if (!(pid > 0)) return undefined;
  try {
    process.kill(pid, 0);
    return pid;
  } catch (err) {
    // ESRCH: gone. EPERM: alive, another user's.
    return (err as NodeJS.ErrnoException).code === 'EPERM' ? pid : undefined;
  }
}

/** Takes DIR/network.pid, refusing when a live process holds it. */
function takePidLock(dir: string): () => void {
  const file = path.join(dir, 'network.pid');
  const pid = runningPid(dir);
  if (pid !== undefined && pid !== process.pid)
    throw new NetworkError(`A network is already running in ${dir} (process ${pid}); stop it first.`);
  fs.writeFileSync(file, String(process.pid));
  return () => fs.rmSync(file, { force: true });
}

/**
 * better-sqlite3 (the PDS's database driver) compiled for another Node than this one, as a sentence
 * that says what runs: npm compiles it against the headers `nodedir` names, and `npm_config_nodedir`
 * in the environment (another Node's) outranks the workspace's .npmrc, which a plain `npm rebuild`
 * would obey again. Undefined for any other error.
 */
export function nativeBuildError(err: unknown): NetworkError | undefined {
  const message = err instanceof Error ? err.message : '';
  const abi = /NODE_MODULE_VERSION (\d+)[\s\S]*NODE_MODULE_VERSION (\d+)/.exec(message);
  if ((err as NodeJS.ErrnoException | undefined)?.code !== 'ERR_DLOPEN_FAILED' || abi === null)
    return undefined;
  // The workspace's Node 22 is the `node` package's binary (node_modules/node/bin/node); its headers
  // are beside it, where the workspace's .npmrc points nodedir.
  const headers = path.join(
    path.dirname(path.dirname(process.execPath)),
    'node_modules',
    `node-${process.platform}-${process.arch}`,
  );
  const run = fs.existsSync(path.join(headers, 'include', 'node'))
    ? `npm rebuild better-sqlite3 --nodedir=${headers}`
    : `npm rebuild better-sqlite3 --nodedir=DIR, DIR holding Node ${process.version}'s headers (include/node)`;
  return new NetworkError(
    `better-sqlite3, the PDS's SQLite driver, was compiled for another Node (NODE_MODULE_VERSION ${abi[1]}; Node ${process.version} needs ${abi[2]}), as happens when npm_config_nodedir in the environment names another Node's headers; in the workspace, run \`${run}\`.`,
    { cause: err },
  );
}

/**
 * Starts a PLC directory and a PDS on loopback; a restart on the same directory keeps ports, DIDs and
 * accounts. A free port is only free until someone binds it: between asking the kernel for one and
 * the server binding it, another process (a parallel test, an outgoing connection's ephemeral port)
 * may take it. A temporary network then starts afresh on new ports; a kept one cannot (its DIDs name
 * its ports) and says so.
 */
export async function startNetwork(opts: NetworkOptions = {}): Promise<Network> {
  if (opts.dir !== undefined) return startOnce(opts);
  return whilePortTaken(TEMPORARY_ATTEMPTS, () => startOnce(opts));
}

/**
 * Runs `start` up to `attempts` times while it fails only because a port was taken (each attempt
 * chooses its ports anew); any other failure, or the last attempt's, is thrown.
 */
export async function whilePortTaken<T>(attempts: number, start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (!(err instanceof PortTaken) || attempt >= attempts) throw err;
    }
  }
}

async function startOnce(opts: NetworkOptions): Promise<Network> {
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
  const state = await loadOrCreateState(stateFile, opts.pdses ?? 1);
  for (const port of [state.plcPort, ...state.pdses.map((p) => p.port)]) {
    if (await portInUse(port)) {
      releaseLock();
      if (temporary) fs.rmSync(dir, { recursive: true, force: true });
      throw new PortTaken(port, dir);
    }
  }
  fs.writeFileSync(stateFile, JSON.stringify(state, null, 2), { mode: 0o600 });

  let plc: Plc | undefined;
  const pdses: Pds[] = [];
  try {
    plc = await startPlc({ port: state.plcPort, dir });
    for (const [i, p] of state.pdses.entries()) {
      pdses.push(
        await startPds({
          port: p.port,
          dir: pdsDir(dir, i),
          plcUrl: plc.url,
          secrets: p.secrets,
          ...(opts.rateLimits === undefined ? {} : { rateLimits: opts.rateLimits }),
          ...(opts.blobUploadLimit === undefined ? {} : { blobUploadLimit: opts.blobUploadLimit }),
        }),
      );
    }
  } catch (err) {
    for (const p of pdses.reverse()) await p.close();
    await plc?.close();
    releaseLock();
    if (temporary) fs.rmSync(dir, { recursive: true, force: true });
    const code = (err as NodeJS.ErrnoException).code;
    const port = (err as { port?: unknown }).port;
    if (code === 'EADDRINUSE' && typeof port === 'number') throw new PortTaken(port, dir, { cause: err });
    throw nativeBuildError(err) ?? err;
  }
  const running = { plc, pdses };
  const views: NetworkPds[] = pdses.map((p) => ({
    url: p.url,
    did: p.did,
    dataDir: p.dataDir,
    adminPassword: p.adminPassword,
  }));
  const plcUrl = plc.url;

  return {
    dir,
    plcUrl,
    pdsUrl: views[0]!.url,
    pdses: views,
    pdsServer: pdses[0]!.server,
    adminPassword: views[0]!.adminPassword,
    ensureAccount: (handle, password, pds = 0) => {
      const home = views[pds];
      if (home === undefined) throw new NetworkError(`This network has no PDS number ${pds + 1}.`);
      return ensureAccount(views, home.url, handle, password);
    },
    pdsOf: async (did) => {
      const url = await pdsInDocument(plcUrl, did);
      const found = views.find((v) => v.url === url);
      if (found === undefined) throw new NetworkError(`${did} names ${url}, no PDS of this network.`);
      return found;
    },
    close: async () => {
      for (const p of [...running.pdses].reverse()) await p.close();
      await running.plc.close();
      releaseLock();
      if (temporary) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The PDS endpoint a DID's current document on the PLC directory names. */
export async function pdsInDocument(plcUrl: string, did: string): Promise<string> {
  const res = await fetch(`${plcUrl}/${encodeURIComponent(did)}/data`);
  if (!res.ok) throw new NetworkError(`The PLC directory has no document for ${did} (${res.status}).`);
  const data = (await res.json()) as { services?: Record<string, { endpoint?: string }> };
  const endpoint = data.services?.['atproto_pds']?.endpoint;
  if (endpoint === undefined) throw new NetworkError(`${did} names no PDS.`);
  return endpoint.replace(/\/+$/, '');
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
  all: NetworkPds[],
  pdsUrl: string,
  handle: string,
  password: string,
): Promise<Account & { created: boolean }> {
  // A handle of this network is answered for by the PDS holding its account, which may be any of them.
  for (const p of all) {
    const found = await xrpc(
      p.url,
      `com.atproto.identity.resolveHandle?handle=${encodeURIComponent(handle)}`,
    );
    if (found.ok) {
      const { did } = (await found.json()) as { did: string };
      return { did, handle, created: false };
    }
  }
  const email = `${handle}@knotless.invalid`;
  const res = await xrpc(pdsUrl, 'com.atproto.server.createAccount', {
    body: { handle, password, email },
  });
  if (!res.ok) {
    const refusal = `${res.status} ${(await res.text()).slice(0, 200)}`;
    // Made before under this handle, and since renamed or deactivated (`knotless dev account`): its
    // handle no longer resolves and its email is taken, but the email and password still sign in,
    // wherever it lives now.
    for (const p of all) {
      const session = await xrpc(p.url, 'com.atproto.server.createSession', {
        body: { identifier: email, password },
      });
      if (session.ok) {
        const made = (await session.json()) as { did: string; handle: string };
        return { did: made.did, handle: made.handle, created: false };
      }
    }
    throw new NetworkError(
      `Could not create the dev account ${handle} (${refusal}); start over in a new --dir if this network's accounts were changed by hand.`,
    );
  }
  const { did } = (await res.json()) as { did: string };
  return { did, handle, created: true };
}
