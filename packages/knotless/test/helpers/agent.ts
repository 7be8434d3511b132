import http from 'node:http';
import { spawn, type ChildProcess } from 'node:child_process';
import { KNOTLESS_BIN } from './cli.ts';

/** A `knotless agent` process of the test network, and what it printed to stderr. */
export interface RunningAgent {
  child: ChildProcess;
  log(): string;
  stop(): Promise<void>;
}

/** Starts `knotless agent --socket socket` with `env`, once it says it is ready. */
export async function spawnAgent(socket: string, env: Record<string, string>): Promise<RunningAgent> {
  const child = spawn(process.execPath, [KNOTLESS_BIN, 'agent', '--socket', socket], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (/^ready$/m.test(out)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`agent exited ${code}: ${err}`)));
  });
  return {
    child,
    log: () => err,
    stop: async () => {
      if (child.exitCode !== null) return;
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const t0 = Date.now();
      await gone;
      if (process.env['KNOTLESS_TEST_DEBUG'])
        process.stderr.write(`agent exit took ${Date.now() - t0}ms\n${err}\n`);
    },
  };
}

/** The agent's answer for a repository: null when it has no current view, else ref → record. */
export async function agentView(
  socket: string,
  q: { did: string; repo: string; pds: string },
): Promise<Map<string, { target?: string; packs: Array<{ id: string }> }> | null> {
  const body = await new Promise<string>((resolve, reject) => {
    http
      .get({ socketPath: socket, path: `/view?${new URLSearchParams(q).toString()}` }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve(text));
      })
      .on('error', reject);
  });
  const view = JSON.parse(body) as {
    confirmed: boolean;
    refs?: Array<{ record: { ref: string; target?: string; packs: Array<{ id: string }> } }>;
  };
  if (!view.confirmed) return null;
  return new Map((view.refs ?? []).map((r) => [r.record.ref, r.record]));
}
