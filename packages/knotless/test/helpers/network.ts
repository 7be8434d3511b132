import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before } from 'node:test';
import { startNetwork, type Network, type NetworkOptions } from 'knotless-devnet';

/** A test network and accounts on it, shared by the tests of one file. */
export interface TestNet {
  net: Network;
  /** Settles when the network is up and its accounts exist; hooks of other helpers await it. */
  ready: Promise<void>;
  password: string;
  /** DIDs by handle. */
  dids: Record<string, string>;
  /** The PDS each account was made on, by handle (an account that moves is not followed here). */
  pdsOf: Record<string, string>;
  /** A fresh temporary directory, removed after the file's tests. */
  tmpdir(): string;
  /**
   * Variables every environment of this file's {@link env} carries (beneath `extra`): a file whose
   * cases script or count requests of one ref layout sets `KNOTLESS_REF_TABLE` here, once.
   */
  defaults: Record<string, string>;
  /** Environment for a CLI process on this network, with its own config and cache directories. */
  env(extra?: Record<string, string>): Record<string, string>;
}

/**
 * Starts one network for the calling test file (before its tests) and stops it after them. With
 * `options.pdses` above one, the accounts are spread over the PDSes in turn (alice.test on the first,
 * bob.test on the second…), so that every flow between accounts is also one between PDSes.
 */
export function useNetwork(
  handles: string[] = ['alice.test', 'bob.test'],
  options: NetworkOptions = {},
): TestNet {
  const dirs: string[] = [];
  let started!: () => void;
  let failed!: (err: unknown) => void;
  const t: TestNet = {
    net: undefined as unknown as Network,
    ready: new Promise<void>((resolve, reject) => {
      started = resolve;
      failed = reject;
    }),
    password: `pw-${crypto.randomBytes(6).toString('hex')}`,
    dids: {},
    pdsOf: {},
    defaults: {},
    tmpdir() {
      const d = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-test-'));
      dirs.push(d);
      return d;
    },
    env(extra = {}) {
      const home = t.tmpdir();
      return {
        PATH: process.env['PATH'] ?? '/usr/bin:/bin',
        HOME: home,
        KNOTLESS_CONFIG_DIR: path.join(home, 'config'),
        KNOTLESS_CACHE_DIR: path.join(home, 'cache'),
        KNOTLESS_PLC_URL: t.net.plcUrl,
        KNOTLESS_DEV_PDS: t.net.pdsUrl,
        ...(t.net.pdses[1] === undefined ? {} : { KNOTLESS_DEV_PDS2: t.net.pdses[1].url }),
        // No agent starts by itself in tests: one left running would outlive the test (and keep the
        // PDS's event stream open while it closes). Tests of the started agent set an idle time.
        KNOTLESS_AGENT_IDLE: '0',
        ...t.defaults,
        ...extra,
      };
    },
  };
  // The network's own failure is reported by the hook below; this only lets the hooks that await
  // `ready` fail with it instead of waiting for ever, without an unhandled rejection when none does.
  t.ready.catch(() => undefined);
  before(async () => {
    try {
      t.net = await startNetwork(options);
    } catch (err) {
      failed(err);
      throw err;
    }
    for (const [i, h] of handles.entries()) {
      const pds = i % t.net.pdses.length;
      t.dids[h] = (await t.net.ensureAccount(h, t.password, pds)).did;
      t.pdsOf[h] = t.net.pdses[pds]!.url;
    }
    started();
  });
  after(async () => {
    // Undefined when the network never started: there is nothing to stop, and the reason is the
    // failure `before` reported.
    await (t.net as Network | undefined)?.close();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });
  return t;
}
