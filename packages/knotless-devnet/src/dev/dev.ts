import crypto from 'node:crypto';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type * as Serve from 'knotless-serve';
import { readConfig } from 'knotless-core/config/env';
import { KnotlessError, isKnotlessError } from 'knotless-core/errors';
import { EXIT_CODES, EXIT_INTERNAL } from 'knotless-core/exit-codes';
import { readJson, writeFileAtomic } from 'knotless-core/fsutil';
import { internalErrorLines, printErr, safeLine, safeText } from 'knotless-core/text/terminal';
import { NetworkError, startNetwork } from '../network.ts';
import { portInUse } from '../ports.ts';
import { startRelay, type Relay } from '../relay/relay.ts';
import { writeEnvFile, writeWrappers } from './env-file.ts';
import { runAccount, runMigrate } from './manage.ts';
import { runKnotless } from './run-knotless.ts';
import { ACCOUNT_ACTIONS } from '../account-state.ts';

/** The dev accounts and the PDS each is made on: alice on the first, bob on the second. */
const ACCOUNTS: Array<[handle: string, pds: number]> = [
  ['alice.test', 0],
  ['bob.test', 1],
];

/**
 * What `knotless-dev --help` prints. The command's full help is the knotless CLI's (`knotless dev
 * --help`, from its command module), kept in one place so the two cannot drift.
 */
export const DEV_USAGE = [
  'usage: knotless-dev [--dir DIR]',
  '       knotless-dev migrate <handle> [--dir DIR]',
  `       knotless-dev account <handle> ${ACCOUNT_ACTIONS.join('|')} [new-handle] [--dir DIR]`,
  '',
  'The program `knotless dev` runs: a local PLC, PDS and appview. See `knotless dev --help`.',
];

/**
 * The appview, or why there is none. The specifier is a variable: knotless-serve (SQLite, web pages)
 * is the workspace's, and the network is useful without it, so its absence is reported, not fatal;
 * any other failure to load (a broken build, a native module compiled for another Node) is reported
 * with its reason.
 */
export async function loadServe(
  name = 'knotless-serve',
): Promise<{ serve: typeof Serve } | { unavailable: string }> {
  try {
    return { serve: (await import(name)) as typeof Serve };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const code = err instanceof Error ? (err as NodeJS.ErrnoException).code : undefined;
    // Only the package itself missing counts as "not installed"; a dependency of it missing is a failure.
    if (code === 'ERR_MODULE_NOT_FOUND' && message.includes(`'${name}'`))
      return { unavailable: `${name} is not installed beside this knotless` };
    return { unavailable: `${name} failed to load: ${message.split('\n')[0] ?? ''}` };
  }
}

/**
 * What `knotless dev` keeps in DIR/dev.json beside the network's own state: the accounts' password
 * (made once, so a restart logs in the same way) and the relay's and appview's ports, so that their
 * URLs (the env file's, sign-in clients registered at the appview's address, links people copied)
 * stay the same across restarts as the PLC's and PDSes' do.
 */
interface DevState {
  password: string;
  relayPort?: number;
  appviewPort?: number;
}

function devStateFile(dir: string): string {
  return path.join(dir, 'dev.json');
}

/** The directory's dev state, with a password made on the first start. */
function loadDevState(dir: string): DevState {
  const saved = readJson<Partial<DevState>>(devStateFile(dir)) ?? {};
  const port = (p: unknown): number | undefined =>
    typeof p === 'number' && Number.isInteger(p) && p > 0 && p < 65536 ? p : undefined;
  const state: DevState = {
    password:
      typeof saved.password === 'string'
        ? saved.password
        : `dev-${crypto.randomBytes(9).toString('base64url')}`,
  };
  const relayPort = port(saved.relayPort);
  const appviewPort = port(saved.appviewPort);
  if (relayPort !== undefined) state.relayPort = relayPort;
  if (appviewPort !== undefined) state.appviewPort = appviewPort;
  if (saved.password !== state.password) saveDevState(dir, state);
  return state;
}

function saveDevState(dir: string, state: DevState): void {
  writeFileAtomic(devStateFile(dir), JSON.stringify(state));
}

/**
 * The port a server had on the last start when it is free, else 0 (a free one), with a line saying
 * what moved: whoever holds the old port is not ours to stop.
 */
async function keptPort(name: string, saved: number | undefined): Promise<number> {
  if (saved === undefined) return 0;
  if (!(await portInUse(saved))) return saved;
  printErr(
    `${name}: port ${saved}, which it had on the last start, is in use by another program; it takes a new port, so addresses kept from before no longer reach it.`,
  );
  return 0;
}

/** The port in a server's http://host:port URL. */
function urlPort(url: string): number {
  return Number(new URL(url).port);
}

/** Logs alice in with `knotless login`, her password on its standard input. */
async function loginAlice(vars: Record<string, string>, password: string): Promise<void> {
  const { code, lastLine } = await runKnotless(['login', 'alice.test', '--password'], vars, `${password}\n`);
  if (code !== 0) {
    throw new KnotlessError(
      'dev-network',
      `Logging alice.test in on the dev network failed: ${safeText(lastLine.replace(/^knotless: /, ''))}`,
    );
  }
}

/** Runs the network until a signal; returns only on a usage error (its exit status). */
export async function runDev(argv: string[]): Promise<number> {
  let values;
  let positionals;
  try {
    ({ values, positionals } = parseArgs({
      args: argv,
      options: { dir: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
    }));
  } catch (err) {
    throw new KnotlessError(
      'usage',
      `${err instanceof Error ? err.message : String(err)}; see knotless dev --help.`,
    );
  }
  const out = (line: string): void => void process.stdout.write(`${safeLine(line)}\n`);
  if (values.help === true) {
    DEV_USAGE.forEach(out);
    return 0;
  }
  // A shell that sourced a network's env file names its folder: `knotless dev migrate alice.test`
  // there acts on that network, wherever it was started.
  const dir = path.resolve(
    values.dir ?? (process.env['KNOTLESS_DEV_DIR'] || path.join(readConfig().dataDir, 'dev')),
  );
  const [verb, ...rest] = positionals;
  if (verb === 'migrate' && rest.length === 1) {
    await runMigrate(dir, rest[0]!, out);
    return 0;
  }
  if (verb === 'account') {
    await runAccount(dir, rest, out);
    return 0;
  }
  if (verb !== undefined)
    throw new KnotlessError(
      'usage',
      `Unknown or incomplete dev command "${safeText(positionals.join(' '))}"; see knotless dev --help.`,
    );
  let net;
  try {
    // This process is the network: everything it writes (PDS databases, keys, appview) is private.
    net = await startNetwork({ dir, privateFiles: true, pdses: 2 });
  } catch (err) {
    if (err instanceof NetworkError) throw new KnotlessError('dev-network', err.message, { cause: err });
    throw err;
  }
  // Filled in once the appview runs; a signal before then stops only the network.
  const running: {
    appview?: { url: string; close(): Promise<void> } | undefined;
    relay?: Relay;
    vars?: Record<string, string>;
  } = {};
  let stopping = false;
  const stop = (): void => {
    // `knotless dev` passes its signals on, and Ctrl-C reaches this process from the terminal too:
    // the second of those must not cut the first one's orderly close short.
    if (stopping) return;
    stopping = true;
    void (running.appview?.close() ?? Promise.resolve())
      // Stopping goes on whatever the appview's close says: the network must still be closed.
      .catch((err: unknown) => printErr(`appview: closing failed: ${String(err)}`))
      // The warm agent a push in the env file's shell started follows the PDS's event stream, which
      // the PDS waits for as it closes: stop it first (it answers what is in flight, then exits).
      .then(async () => {
        if (running.vars === undefined) return;
        const { code, lastLine } = await runKnotless(['agent', 'stop'], running.vars);
        if (code !== 0) printErr(`agent: stopping failed: ${safeText(lastLine)}`);
      })
      .catch((err: unknown) => printErr(`agent: stopping failed: ${String(err)}`))
      .then(() => running.relay?.close())
      .then(() => net.close())
      .then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);

  const devState = loadDevState(dir);
  const password = devState.password;
  try {
    for (const [handle, pds] of ACCOUNTS) await net.ensureAccount(handle, password, pds);
  } catch (err) {
    await net.close();
    if (err instanceof NetworkError) throw new KnotlessError('dev-network', err.message, { cause: err });
    throw err;
  }

  // No relay can be installed here: the stand-in offers its read API over the network's PDSes.
  const relay = await startRelay({
    port: await keptPort('relay', devState.relayPort),
    pdses: net.pdses.map((p) => p.url),
    log: (line) => printErr(`relay: ${line}`),
  });
  running.relay = relay;

  // The appview follows the PDS's event stream like any other: pushes reach it only that way.
  const loaded = await loadServe();
  if ('unavailable' in loaded) printErr(`appview: not available (${loaded.unavailable}); running without it`);
  const serve = 'serve' in loaded ? loaded.serve : undefined;
  const appview = await serve?.startAppview(
    {
      ...serve.defaultConfig(path.join(dir, 'appview')),
      port: await keptPort('appview', devState.appviewPort),
      plcUrl: net.plcUrl,
      firehoses: net.pdses.map((p) => p.url.replace(/^http/, 'ws')),
      backfillPdses: net.pdses.map((p) => p.url),
      dev: true,
    },
    (line) => printErr(`appview: ${line}`),
  );
  running.appview = appview;
  devState.relayPort = urlPort(relay.url);
  if (appview !== undefined) devState.appviewPort = urlPort(appview.url);
  saveDevState(dir, devState);

  const vars: Record<string, string> = {
    KNOTLESS_PLC_URL: net.plcUrl,
    KNOTLESS_DEV_PDS: net.pdsUrl,
    KNOTLESS_DEV_PDS2: net.pdses[1]!.url,
    KNOTLESS_DEV_RELAY: relay.url,
    KNOTLESS_DEV_PASSWORD: password,
    KNOTLESS_DEV_DIR: dir,
    KNOTLESS_CONFIG_DIR: path.join(dir, 'config'),
    KNOTLESS_CACHE_DIR: path.join(dir, 'cache'),
    ...(appview === undefined ? {} : { KNOTLESS_APPVIEW: appview.url }),
  };
  running.vars = vars;
  await loginAlice(vars, password);

  const binDir = path.join(dir, 'bin');
  const envFile = path.join(dir, 'env');
  writeWrappers(binDir);
  writeEnvFile(envFile, vars, binDir);

  out(`knotless dev network in ${dir}`);
  out(`  PLC directory  ${net.plcUrl}`);
  for (const [i, p] of net.pdses.entries()) {
    const here = ACCOUNTS.filter(([, n]) => n === i).map(([h]) => h);
    out(`  PDS ${i + 1}          ${p.url}${here.length === 0 ? '' : ` (${here.join(', ')})`}`);
  }
  out(`  relay          ${relay.url} (a stand-in: the relay's read API over the PDSes)`);
  if (appview !== undefined) out(`  appview        ${appview.url}`);
  out(`  accounts       ${ACCOUNTS.map(([h]) => h).join(', ')} (password in KNOTLESS_DEV_PASSWORD)`);
  out('');
  out('In another shell:');
  out(`  . ${envFile}`);
  out('  knotless whoami');
  out('  knotless repo create hello && knotless repo list');
  out('');
  out('Ctrl-C stops the network; its data stays in the directory for the next start.');
  out('ready');
  // Stay in the foreground: the servers keep the event loop alive until a signal closes them.
  return await new Promise<never>(() => {});
}

/** The `knotless-dev` program: `knotless dev` runs it. Failures print one sentence, exit codes as knotless's. */
export async function devMain(argv: string[]): Promise<void> {
  try {
    process.exitCode = await runDev(argv);
  } catch (err) {
    if (isKnotlessError(err)) {
      printErr(`knotless: ${err.message}`);
      process.exit(EXIT_CODES[err.code]);
    }
    printErr(...internalErrorLines(err));
    process.exit(EXIT_INTERNAL);
  }
}
