import crypto from 'node:crypto';
import path from 'node:path';
import type * as Devnet from 'knotless-devnet';
import type * as Serve from 'knotless-serve';
import { login } from '../../auth/login.ts';
import { Context } from '../../context.ts';
import { writeEnvFile, writeWrappers } from '../../dev/env-file.ts';
import { KnotlessError } from 'knotless-core/errors';
import { readJson, writeFileAtomic } from 'knotless-core/fsutil';
import { stringOption, type Command } from '../command.ts';

const ACCOUNTS = ['alice.test', 'bob.test'];

async function loadDevnet(): Promise<typeof Devnet> {
  try {
    return await import('knotless-devnet');
  } catch (err) {
    throw new KnotlessError(
      'dev-network',
      '`knotless dev` needs the knotless-devnet package (the PDS and PLC); run `npm install` in the knotless workspace.',
      { cause: err },
    );
  }
}

/**
 * The appview, or why there is none. The specifier is a variable so that the bundler leaves it
 * alone: knotless-serve (SQLite, web pages) loads only for `knotless dev`, from the workspace. The
 * network is useful without it, so its absence is reported, not fatal; any other failure to load
 * (a broken build, a native module compiled for another Node) is reported with its reason.
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

export const command: Command = {
  name: 'dev',
  args: '',
  summary: 'run a local network (PLC, PDS and appview) to try knotless on',
  details: [
    'Creates the accounts alice.test and bob.test, logs alice in, writes DIR/env (source it in another shell) and prints "ready". Data stays in DIR for the next start; Ctrl-C stops the network.',
  ],
  options: {
    dir: {
      type: 'string',
      value: 'DIR',
      help: 'keep the network here (default: ~/.local/share/knotless/dev)',
    },
  },
  positionals: { min: 0, max: 0 },
  async run({ ctx, io, args }) {
    const dir = path.resolve(stringOption(args, 'dir') ?? path.join(ctx().config.dataDir, 'dev'));
    const { startNetwork, NetworkError } = await loadDevnet();
    let net;
    try {
      // This process is the network: everything it writes (PDS databases, keys, appview) is private.
      net = await startNetwork({ dir, privateFiles: true });
    } catch (err) {
      if (err instanceof NetworkError) throw new KnotlessError('dev-network', err.message, { cause: err });
      throw err;
    }
    // Filled in once the appview runs; a signal before then stops only the network.
    const running: { appview?: { url: string; close(): Promise<void> } | undefined } = {};
    const stop = (): void => {
      void (running.appview?.close() ?? Promise.resolve())
        // Stopping goes on whatever the appview's close says: the network must still be closed.
        .catch((err: unknown) => io.err(`appview: closing failed: ${String(err)}`))
        .then(() => net.close())
        .then(() => process.exit(0));
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);

    const password = devPassword(dir);
    for (const handle of ACCOUNTS) await net.ensureAccount(handle, password);

    // The appview follows the PDS's event stream like any other: pushes reach it only that way.
    const loaded = await loadServe();
    if ('unavailable' in loaded) io.err(`appview: not available (${loaded.unavailable}); running without it`);
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
      (line) => io.err(`appview: ${line}`),
    );
    running.appview = appview;

    const vars: Record<string, string> = {
      KNOTLESS_PLC_URL: net.plcUrl,
      KNOTLESS_DEV_PDS: net.pdsUrl,
      KNOTLESS_DEV_PASSWORD: password,
      KNOTLESS_CONFIG_DIR: path.join(dir, 'config'),
      KNOTLESS_CACHE_DIR: path.join(dir, 'cache'),
      ...(appview === undefined ? {} : { KNOTLESS_APPVIEW: appview.url }),
    };
    // Log alice in exactly as a user of the env file would be.
    const devCtx = new Context({
      ...ctx().config,
      plcUrl: net.plcUrl,
      devPds: net.pdsUrl,
      configDir: vars['KNOTLESS_CONFIG_DIR']!,
      cacheDir: vars['KNOTLESS_CACHE_DIR']!,
      service: undefined,
      identifier: undefined,
      password: undefined,
    });
    await login(devCtx, 'alice.test', password);

    const binDir = path.join(dir, 'bin');
    const envFile = path.join(dir, 'env');
    writeWrappers(binDir);
    writeEnvFile(envFile, vars, binDir);

    io.out(`knotless dev network in ${dir}`);
    io.out(`  PLC directory  ${net.plcUrl}`);
    io.out(`  PDS            ${net.pdsUrl}`);
    if (appview !== undefined) io.out(`  appview        ${appview.url}`);
    io.out(`  accounts       ${ACCOUNTS.join(', ')} (password in KNOTLESS_DEV_PASSWORD)`);
    io.out('');
    io.out('In another shell:');
    io.out(`  . ${envFile}`);
    io.out('  knotless whoami');
    io.out('  knotless repo create hello && knotless repo list');
    io.out('');
    io.out('Ctrl-C stops the network; its data stays in the directory for the next start.');
    io.out('ready');
    // Stay in the foreground: the servers keep the event loop alive until a signal closes them.
    await new Promise<never>(() => {});
  },
};
