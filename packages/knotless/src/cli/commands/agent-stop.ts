import { post } from '../../agent/lifecycle.ts';
import { KnotlessError } from 'knotless-core/errors';
import type { Command } from '../command.ts';
import { agentStatus } from './agent-status.ts';

export const command: Command = {
  name: 'agent stop',
  args: '',
  summary: "stop this build's warm agent once its requests in flight are answered",
  positionals: { min: 0, max: 0 },
  async run({ ctx, io }) {
    const config = ctx().config;
    const status = await agentStatus(config);
    if (status === undefined) return io.out('no agent is running');
    await post(status.socket, '/stop');
    // Stopped means gone: wait (bounded by the agent's own drain limit) for the process to end.
    const deadline = Date.now() + config.httpTimeoutMs + 10_000;
    while (alive(status.pid)) {
      if (Date.now() > deadline)
        throw new KnotlessError(
          'usage',
          `The agent (pid ${status.pid}) has not stopped; end it with \`kill ${status.pid}\`.`,
        );
      await new Promise((r) => setTimeout(r, 50));
    }
    io.out(`stopped the agent (pid ${status.pid})`);
  },
};

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}
