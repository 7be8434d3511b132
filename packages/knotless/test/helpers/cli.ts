import { spawn } from 'node:child_process';
import { BIN_SCRIPTS } from '../../src/paths.ts';

/** The CLI as users run it: the bundle `npm test` builds first. */
export const KNOTLESS_BIN = BIN_SCRIPTS['knotless']!;

/** What a finished process left behind. */
export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a program to completion with the given environment and standard input. */
export function runProcess(
  cmd: string,
  args: string[],
  opts: { env: Record<string, string>; input?: string; cwd?: string },
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: opts.env, cwd: opts.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    // A child that exits before reading its input says why on stderr; EPIPE would only hide that.
    child.stdin.on('error', () => {});
    child.stdin.end(opts.input ?? '');
  });
}

/** Runs the real `knotless` CLI as a separate process on this Node. */
export function knotless(
  args: string[],
  opts: { env: Record<string, string>; input?: string },
): Promise<Run> {
  return runProcess(process.execPath, [KNOTLESS_BIN, ...args], opts);
}
