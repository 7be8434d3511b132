import { spawn } from 'node:child_process';
import { knotlessScripts } from './env-file.ts';

/**
 * Runs the knotless CLI in the environment the env file sets up (`vars`, with the variables it
 * unsets removed), exactly as a user of that file would, so that this package never loads knotless's
 * own code (sessions, the agent). Resolves with its exit status, the last line of its stderr and its stdout.
 */
export async function runKnotless(
  args: string[],
  vars: Record<string, string>,
  input = '',
): Promise<{ code: number | null; lastLine: string; stdout: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, ...vars };
  for (const name of ['KNOTLESS_SERVICE', 'KNOTLESS_IDENTIFIER', 'KNOTLESS_PASSWORD']) delete env[name];
  const cli = knotlessScripts()['knotless'];
  if (cli === undefined) throw new Error('the knotless package names no knotless executable');
  const child = spawn(process.execPath, [cli, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  let stdout = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stdin.end(input);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  return { code, lastLine: stderr.trim().split('\n').at(-1) ?? '', stdout };
}
