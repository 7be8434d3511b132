import { findAgent } from '../../agent/autostart.ts';
import { post, type AgentStatus } from '../../agent/lifecycle.ts';
import { KnotlessError } from 'knotless-core/errors';
import { JSON_OPTION, type Command } from '../command.ts';

/** The agent's status, or undefined when none answers at its socket. */
export async function agentStatus(config: Parameters<typeof findAgent>[0]): Promise<AgentStatus | undefined> {
  const found = findAgent(config);
  if (found.refusal !== undefined) throw new KnotlessError('permission-denied', found.refusal);
  if (found.socket === undefined) return undefined;
  try {
    return JSON.parse(await post(found.socket, '/status', 'GET')) as AgentStatus;
  } catch (err) {
    // A socket left by an agent that died: nobody listens.
    if ((err as NodeJS.ErrnoException).code === 'ECONNREFUSED') return undefined;
    throw err;
  }
}

export const command: Command = {
  name: 'agent status',
  args: '',
  summary: "say whether this build's warm agent runs, and since when",
  options: { json: JSON_OPTION },
  positionals: { min: 0, max: 0 },
  async run({ ctx, io, args }) {
    const status = await agentStatus(ctx().config);
    if (args.values['json'] === true) {
      io.out(JSON.stringify(status === undefined ? { running: false } : { running: true, ...status }));
      return;
    }
    if (status === undefined) return io.out('no agent is running');
    io.out(
      `agent ${status.pid} (build ${status.build}) on ${status.socket}, since ${status.startedAt}; ` +
        (status.idleMs > 0
          ? `idle for ${Math.round(status.idleForMs / 1000)} s of ${Math.round(status.idleMs / 1000)} s`
          : 'runs until stopped'),
    );
  },
};
