import { spawn } from 'node:child_process';
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
import { startRelay, type Relay } from '../relay/relay.ts';
import { knotlessScripts, writeEnvFile, writeWrappers } from './env-file.ts';

const ACCOUNTS = ['alice.test', 'bob.test'];

/**
 * What `knotless-dev --help` prints. The command's full help is the knotless CLI's (`knotless dev
 * --help`, from its command module), kept in one place so the two cannot drift.
 */
export const DEV_USAGE = [
  'usage: knotless-dev [--dir DIR]',
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

/** The dev accounts' password: made once per directory, kept so a restart logs in the same way. */
function devPassword(dir: string): string {
  const file = path.join(dir, 'dev.json');
  const saved = readJson<{ password?: string }>(file)?.password;
  if (saved !== undefined) return saved;
  const password = `dev-${crypto.randomBytes(9).toString('base64url')}`;
  writeFileAtomic(file, JSON.stringify({ password }));
  return password;
}

/**
 * Runs the knotless CLI in the environment the env file sets up (`vars`, with the variables it
 * unsets removed), exactly as a user of that file would, so that this package never loads knotless's
 * own code (sessions, the agent). Resolves with its exit status and the last line of its stderr.
 */
export async function runKnotless(
  args: string[],
  vars: Record<string, string>,
  input = '',
): Promise<{ code: number | null; lastLine: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, ...vars };
  for (const name of ['KNOTLESS_SERVICE', 'KNOTLESS_IDENTIFIER', 'KNOTLESS_PASSWORD']) delete env[name];
  const cli = knotlessScripts()['knotless'];
  if (cli === undefined) throw new Error('the knotless package names no knotless executable');
  const child = spawn(process.execPath, [cli, ...args], { env, stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  child.stdin.end(input);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  return { code, lastLine: stderr.trim().split('\n').at(-1) ?? '' };
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
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { dir: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      allowPositionals: false,
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
  const dir = path.resolve(values.dir ?? path.join(readConfig().dataDir, 'dev'));
  let net;
  try {
    // This process is the network: everything it writes (PDS databases, keys, appview) is private.
    net = await startNetwork({ dir, privateFiles: true });
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

  const password = devPassword(dir);
  for (const handle of ACCOUNTS) await net.ensureAccount(handle, password);

  // No relay can be installed here: the stand-in offers its read API over the network's PDSes.
  const relay = await startRelay({ pdses: [net.pdsUrl], log: (line) => printErr(`relay: ${line}`) });
  running.relay = relay;

  // The appview follows the PDS's event stream like any other: pushes reach it only that way.
  const loaded = await loadServe();
  if ('unavailable' in loaded) printErr(`appview: not available (${loaded.unavailable}); running without it`);
  const serve = 'serve' in loaded ? loaded.serve : undefined;
  const appview = await serve?.startAppview(
    {
      ...serve.defaultConfig(path.join(dir, 'appview')),
      port: 0,
      plcUrl: net.plcUrl,
      firehoses: [net.pdsUrl.replace(/^http/, 'ws')],
      backfillPdses: [net.pdsUrl],
      dev: true,
    },
    (line) => printErr(`appview: ${line}`),
  );
  running.appview = appview;

  const vars: Record<string, string> = {
    KNOTLESS_PLC_URL: net.plcUrl,
    KNOTLESS_DEV_PDS: net.pdsUrl,
    KNOTLESS_DEV_RELAY: relay.url,
    KNOTLESS_DEV_PASSWORD: password,
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
  out(`  PDS            ${net.pdsUrl}`);
  out(`  relay          ${relay.url} (a stand-in: the relay's read API over the PDSes)`);
  if (appview !== undefined) out(`  appview        ${appview.url}`);
  out(`  accounts       ${ACCOUNTS.join(', ')} (password in KNOTLESS_DEV_PASSWORD)`);
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
