import crypto from 'node:crypto';
import path from 'node:path';
import type * as Devnet from 'knotless-devnet';
import { login } from '../../auth/login.ts';
import { Context } from '../../context.ts';
import { writeEnvFile, writeWrappers } from '../../dev/env-file.ts';
import { KnotlessError } from '../../errors.ts';
import { readJson, writeFileAtomic } from '../../fsutil.ts';
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
  usage: 'dev [--dir DIR]',
  summary: 'run a local network (PLC + PDS) to try knotless on',
  options: { dir: { type: 'string' } },
  positionals: { min: 0, max: 0 },
  async run({ ctx, io, args }) {
    const dir = path.resolve(stringOption(args, 'dir') ?? path.join(ctx().config.dataDir, 'dev'));
    const { startNetwork, NetworkError } = await loadDevnet();
    let net;
    try {
      net = await startNetwork({ dir });
    } catch (err) {
      if (err instanceof NetworkError) throw new KnotlessError('dev-network', err.message, { cause: err });
      throw err;
    }
    const stop = (): void => {
      void net.close().then(() => process.exit(0));
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);

    const password = devPassword(dir);
    for (const handle of ACCOUNTS) await net.ensureAccount(handle, password);

    const vars = {
      KNOTLESS_PLC_URL: net.plcUrl,
      KNOTLESS_DEV_PDS: net.pdsUrl,
      KNOTLESS_DEV_PASSWORD: password,
      KNOTLESS_CONFIG_DIR: path.join(dir, 'config'),
      KNOTLESS_CACHE_DIR: path.join(dir, 'cache'),
    };
    // Log alice in exactly as a user of the env file would be.
    const devCtx = new Context({
      ...ctx().config,
      plcUrl: vars.KNOTLESS_PLC_URL,
      devPds: vars.KNOTLESS_DEV_PDS,
      configDir: vars.KNOTLESS_CONFIG_DIR,
      cacheDir: vars.KNOTLESS_CACHE_DIR,
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
