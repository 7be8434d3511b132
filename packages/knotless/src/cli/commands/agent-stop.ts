import { alive, post } from '../../agent/lifecycle.ts';
import { KnotlessError } from 'knotless-core/errors';
import type { Config } from 'knotless-core/config/env';
import type { Command } from '../command.ts';
import { agentStatus } from './agent-status.ts';

/**
 * Stops this build's agent for `config`'s cache, if one runs, and returns once its process has ended
 * (bounded by the agent's own drain limit): its pid, or undefined when none ran.
 */
export async function stopAgent(config: Config): Promise<number | undefined> {
  const status = await agentStatus(config);
  if (status === undefined) return undefined;
  let leaving = false;
  try {
    await post(status.socket, '/stop');
  } catch (err) {
    // It is leaving by itself (idle) between the two questions: its socket is gone, its process may
    // not be yet. Nothing to stop, but what this returns still means that no agent runs.
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ECONNREFUSED' && code !== 'ENOENT') throw err;
    leaving = true;
  }
  const deadline = Date.now() + config.httpTimeoutMs + 10_000;
  while (alive(status.pid)) {
    if (Date.now() > deadline)
      throw new KnotlessError(
        'usage',
        `The agent (pid ${status.pid}) has not stopped; end it with \`kill ${status.pid}\`.`,
      );
    await new Promise((r) => setTimeout(r, 50));
  }
  return leaving ? undefined : status.pid;
}

export const command: Command = {
  name: 'agent stop',
  args: '',
  summary: "stop this build's warm agent once its requests in flight are answered",
  positionals: { min: 0, max: 0 },
  async run({ ctx, io }) {
    const pid = await stopAgent(ctx().config);
    io.out(pid === undefined ? 'no agent is running' : `stopped the agent (pid ${pid})`);
  },
};
