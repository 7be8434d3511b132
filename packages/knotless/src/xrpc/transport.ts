import fs from 'node:fs';
import tls from 'node:tls';
import { Agent, type Dispatcher } from 'undici';
import type { Config } from '../config/env.ts';

let shared: Dispatcher | undefined;

/**
 * The one connection pool of this process. Keep-alive so that consecutive requests to a PDS share a
 * connection (each new connection costs round trips); KNOTLESS_CA_CERTS adds trusted certificates.
 */
export function dispatcherFor(config: Pick<Config, 'caCerts'>): Dispatcher {
  if (shared !== undefined) return shared;
  const ca =
    config.caCerts === undefined
      ? undefined
      : [...tls.rootCertificates, fs.readFileSync(config.caCerts, 'utf8')];
  shared = new Agent({
    keepAliveTimeout: 30_000,
    connect: { timeout: 10_000, ...(ca === undefined ? {} : { ca }) },
  });
  return shared;
}

/** Closes the pool so the process can exit without waiting for idle sockets. */
export async function closeDispatcher(): Promise<void> {
  const d = shared;
  shared = undefined;
  await d?.close();
}
