import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  makeCertificate,
  startDelayLink,
  startGitHttp,
  startNetwork,
  startProxy,
  type Certificate,
  type DelayLink,
  type GitHttpServer,
  type Network,
  type Proxy,
} from 'knotless-devnet';

/** Everything a bench run talks to: the network, its https fronts, and one delay link per RTT. */
export interface Rig {
  dir: string;
  net: Network;
  cert: Certificate;
  password: string;
  /** The https front of the PDS: it counts requests and connections. */
  pdsFront: Proxy;
  /** The https front of git's smart HTTP, serving `gitRoot`. */
  gitFront: Proxy;
  gitRoot: string;
  /** Links by RTT: to the PDS front and to the git front. */
  links: Map<number, { pds: DelayLink; git: DelayLink }>;
  close(): Promise<void>;
}

function portOf(url: string): number {
  return Number(new URL(url).port);
}

/** Starts the network, the TLS fronts, git http-backend and a delay link per RTT. */
export async function startRig(rtts: number[], plain: boolean, rateLimits = false): Promise<Rig> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-bench-'));
  const net = await startNetwork({ dir: path.join(dir, 'net'), rateLimits });
  const password = 'bench-password';
  await net.ensureAccount('alice.test', password);
  const cert = makeCertificate();
  const gitRoot = path.join(dir, 'git-http');
  fs.mkdirSync(gitRoot);
  const gitHttp: GitHttpServer = await startGitHttp(gitRoot);
  const tls = plain ? {} : { tls: cert };
  const pdsFront = await startProxy({ target: net.pdsUrl, ...tls });
  const gitFront = await startProxy({ target: gitHttp.url, ...tls });
  const links = new Map<number, { pds: DelayLink; git: DelayLink }>();
  for (const rtt of rtts) {
    links.set(rtt, {
      // --plain: the requests alone, with connecting (TCP and TLS) free.
      pds: await startDelayLink({
        target: { host: '127.0.0.1', port: portOf(pdsFront.url) },
        rttMs: rtt,
        chargeHandshake: !plain,
      }),
      git: await startDelayLink({
        target: { host: '127.0.0.1', port: portOf(gitFront.url) },
        rttMs: rtt,
        chargeHandshake: !plain,
      }),
    });
  }
  return {
    dir,
    net,
    cert,
    password,
    pdsFront,
    gitFront,
    gitRoot,
    links,
    close: async () => {
      for (const l of links.values()) {
        await l.pds.close();
        await l.git.close();
      }
      await pdsFront.close();
      await gitFront.close();
      await gitHttp.close();
      await net.close();
      // Detached compactions may still be writing into the cache: retry until they are gone.
      fs.rmSync(dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 250 });
    },
  };
}
