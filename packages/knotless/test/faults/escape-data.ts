// Hostile text and helpers for the escape cases (escape-cases.ts): records written straight to the
// PDS under any key, a check that output holds no raw control character, and the agent's log.
import type { ChildProcess } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { spawnAgent } from '../helpers/agent.ts';
import type { Run } from '../helpers/cli.ts';
import { lastLine } from './checks.ts';
import type { FaultEnv } from './env.ts';
import { waitUntil } from '../helpers/wait.ts';

/** Everything that could act on a terminal: ESC sequences, an OSC title, CR/LF, C1 CSI, bidi, LS, NUL. */
export const HOSTILE_TEXT =
  '\u001b[2J\u001b[H\u001b]0;owned\u0007\r\n\u001b[32mknotless: verified, all good\u001b[0m\u009b2J\u202egnp.exe\u2028\u0085\u0000\u007f';

export const RAW =
  // eslint-disable-next-line no-control-regex -- these are what must not appear
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/u;

/** "clean" when no output holds a raw control character (line breaks between lines aside), or where one is. */
export function clean(...runs: Run[]): string {
  for (const [i, r] of runs.entries()) {
    for (const [stream, text] of [
      ['stdout', r.stdout],
      ['stderr', r.stderr],
    ] as const) {
      const m = RAW.exec(text);
      if (m !== null) return `raw U+${m[0].codePointAt(0)!.toString(16)} in ${stream} of run ${i + 1}`;
      if (text.split('\n').some((l) => l.startsWith('knotless: verified')))
        return `a forged line in ${stream} of run ${i + 1}`;
    }
  }
  return 'no raw control character';
}

export const okOrSaid = (r: Run) => (r.code === 0 ? 'ok' : `failed: ${lastLine(r.stderr)}`);

/** A ref record with the given fields under key `key`, straight to the PDS. */
export async function putAt(env: FaultEnv, key: string, value: Record<string, unknown>): Promise<void> {
  await env.pdsPost('com.atproto.repo.putRecord', {
    repo: env.did,
    collection: 'dev.knotless.ref',
    rkey: key,
    record: { $type: 'dev.knotless.ref', updatedAt: new Date().toISOString(), ...value },
  });
}

/** The first parent of `tip`, read from a throwaway clone. */
export async function parentOf(env: FaultEnv, url: string, tip: string): Promise<string> {
  const dir = env.alice.dir();
  await env.alice.ok(dir, 'clone', '-q', url, 'p');
  return (await env.alice.ok(path.join(dir, 'p'), 'rev-parse', `${tip}^`)).trim();
}

/**
 * Runs `knotless agent` as alice (through the proxy) and asks it for a view of each step's
 * repository (which makes it list it), waiting for its log to match the step's `until`; returns the log.
 */
export async function agentLog(
  env: FaultEnv,
  steps: Array<{ repo: string; before?: () => void; until: RegExp }>,
): Promise<string> {
  const socket = path.join(env.alice.dir(), 'agent.sock');
  const agent = await spawnAgent(socket, { ...env.alice.env, KNOTLESS_SERVICE: env.proxy.url });
  try {
    for (const step of steps) {
      step.before?.();
      const q = new URLSearchParams({ did: env.did, repo: step.repo, pds: env.t.net.pdsUrl });
      await new Promise<void>((resolve, reject) => {
        http
          .get({ socketPath: socket, path: `/view?${q.toString()}` }, (res) =>
            res.resume().on('end', resolve),
          )
          .on('error', reject);
      });
      // The agent lists in the background, once its event stream has proved live by delivering a
      // message (an idle PDS sends none): a write of an unrelated record now and then makes one. Its
      // log says when it has listed.
      let n = 0;
      await waitUntil(`the agent's log to match ${String(step.until)}`, async () => {
        if (step.until.test(agent.log())) return true;
        if (n++ % 10 === 0) await poke(env);
        return undefined;
      });
    }
    return agent.log();
  } finally {
    await stop(agent.child);
  }
}

/** Writes a record of no repository, so that the PDS's event stream carries a message. */
async function poke(env: FaultEnv): Promise<void> {
  await env.pdsPost('com.atproto.repo.putRecord', {
    repo: env.did,
    collection: 'dev.knotless.testpoke',
    rkey: 'poke',
    record: { $type: 'dev.knotless.testpoke', at: new Date().toISOString() },
  });
}

/** Stops a process this case started and waits until it is gone (killed outright if it lingers). */
async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await gone;
  clearTimeout(timer);
}
