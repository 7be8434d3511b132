import path from 'node:path';
import type { Config } from '../config/env.ts';

/** Where the warm agent listens: KNOTLESS_AGENT_SOCKET, else `agent.sock` in the cache directory. */
export function agentSocketPath(
  config: Pick<Config, 'cacheDir'>,
  env: NodeJS.ProcessEnv = process.env,
): string {
  const named = env['KNOTLESS_AGENT_SOCKET'];
  return named !== undefined && named !== '' ? named : path.join(config.cacheDir, 'agent.sock');
}
