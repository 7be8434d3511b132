import fs from 'node:fs';
import path from 'node:path';
import { Secp256k1Keypair } from '@atproto/crypto';
import { Client as PlcClient } from '@did-plc/lib';
import * as plc from '@did-plc/server';
import { listenLoopback } from './http.ts';

type Op = Parameters<plc.MockDatabase['validateAndAddOp']>[1];

/**
 * The PLC directory's in-memory database, with every accepted operation appended to a JSON-lines log
 * so that a restarted dev network replays them and keeps its DIDs. The upstream server only offers
 * Postgres or memory; operations are signed, so replaying them through validation is exact.
 */
class LoggedPlcDatabase extends plc.MockDatabase {
  #logFile: string | undefined;

  constructor(logFile: string | undefined) {
    super();
    this.#logFile = logFile;
  }

  /** Replays the operations logged by an earlier run. */
  async replay(): Promise<number> {
    if (this.#logFile === undefined || !fs.existsSync(this.#logFile)) return 0;
    const lines = fs.readFileSync(this.#logFile, 'utf8').split('\n').filter(Boolean);
    for (const line of lines) {
      const { did, op } = JSON.parse(line) as { did: string; op: Op };
      await super.validateAndAddOp(did, op);
    }
    return lines.length;
  }

  override async validateAndAddOp(did: string, proposed: Op): Promise<void> {
    await super.validateAndAddOp(did, proposed);
    if (this.#logFile !== undefined) {
      fs.appendFileSync(this.#logFile, JSON.stringify({ did, op: proposed }) + '\n');
    }
  }
}

/** A running PLC directory. */
export interface Plc {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** Starts a PLC directory on 127.0.0.1:port; with `dir`, its operations survive a restart. */
export async function startPlc(opts: { port: number; dir?: string }): Promise<Plc> {
  const logFile = opts.dir === undefined ? undefined : path.join(opts.dir, 'plc-ops.jsonl');
  const db = new LoggedPlcDatabase(logFile);
  await db.replay();
  const server = plc.PlcServer.create({ db, port: opts.port });
  const listening = await listenLoopback(server.app, opts.port);
  return {
    url: `http://localhost:${opts.port}`,
    port: opts.port,
    close: () => listening.close(),
  };
}

/**
 * Registers a DID of one's own on a PLC directory, naming any handle and PDS: what anyone can do on
 * the real plc.directory, since the directory checks signatures, not claims. Tests use it to play an
 * impostor whose DID document claims someone else's handle.
 */
export async function registerDid(plcUrl: string, opts: { handle: string; pds: string }): Promise<string> {
  const key = await Secp256k1Keypair.create();
  return new PlcClient(plcUrl).createDid({
    signingKey: key.did(),
    handle: opts.handle,
    pds: opts.pds,
    rotationKeys: [key.did()],
    signer: key,
  });
}

/**
 * Points an account's DID document at another PDS address: a PLC operation signed by the rotation
 * key of the network's PDS numbered `pds` (the key that PDS signs its accounts' operations with, read
 * from the network's state), as a migration would. Tests put a proxy there, in front of the real PDS,
 * so that every reader of the account (the CLI, an appview) goes through it.
 */
export async function setPdsEndpoint(
  net: { dir: string; plcUrl: string },
  did: string,
  endpoint: string,
  pds = 0,
): Promise<void> {
  const state = JSON.parse(fs.readFileSync(path.join(net.dir, 'network.json'), 'utf8')) as {
    pdses: Array<{ secrets: { plcRotationKeyHex: string } }>;
  };
  const hex = state.pdses[pds]?.secrets.plcRotationKeyHex;
  if (hex === undefined) throw new Error(`the network has no PDS numbered ${pds}`);
  const key = await Secp256k1Keypair.import(hex);
  await new PlcClient(net.plcUrl).updatePds(did, key, endpoint);
}
