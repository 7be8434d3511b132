// What the benches that run on a local dev network share: a command's environment on it, and a warm
// agent started as `knotless agent` and waited for until it says ready.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BIN_SCRIPTS } from '../packages/knotless/src/paths.ts';

/**
 * `dir`/bin holding `knotless` and `git-remote-knotless`, each running this bench's Node on the
 * built bundle (what npm links, without the launcher's choice of Node); returns its path.
 */
export function knotlessBin(dir: string): string {
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin);
  for (const name of ['knotless', 'git-remote-knotless'])
    fs.writeFileSync(
      path.join(bin, name),
      `#!/bin/sh\nexec '${process.execPath}' '${BIN_SCRIPTS[name]}' "$@"\n`,
      {
        mode: 0o755,
      },
    );
  return bin;
}

/** git and knotless on the network, with `bin` (the wrappers) first on PATH and state under `dir`. */
export function localEnv(
  dir: string,
  bin: string,
  net: { plcUrl: string; pdsUrl: string },
): Record<string, string> {
  return {
    PATH: `${bin}:${process.env['PATH'] ?? '/usr/bin:/bin'}`,
    HOME: dir,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_AUTHOR_NAME: 'bench',
    GIT_AUTHOR_EMAIL: 'bench@example.com',
    GIT_COMMITTER_NAME: 'bench',
    GIT_COMMITTER_EMAIL: 'bench@example.com',
    KNOTLESS_CONFIG_DIR: path.join(dir, 'config'),
    KNOTLESS_CACHE_DIR: path.join(dir, 'cache'),
    KNOTLESS_PLC_URL: net.plcUrl,
    KNOTLESS_DEV_PDS: net.pdsUrl,
    // The push's structure/blob split is on unless the bench itself runs with it off, to compare.
    ...(process.env['KNOTLESS_PACK_SPLIT'] === undefined
      ? {}
      : { KNOTLESS_PACK_SPLIT: process.env['KNOTLESS_PACK_SPLIT'] }),
  };
}

/** `knotless agent` on `socket` with `env`, once it has said ready. */
export function startAgentProcess(socket: string, env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, [BIN_SCRIPTS['knotless']!, 'agent', '--socket', socket], {
    env,
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (/^ready$/m.test(out)) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`the agent exited ${code}`)));
  });
}
