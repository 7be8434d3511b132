import { startAgent } from '../../agent/server.ts';
import { Context } from '../../context.ts';
import { stringOption, type Command } from '../command.ts';

export const command: Command = {
  name: 'agent',
  args: '',
  summary: 'keep PDS connections warm and repository views current for git',
  details: [
    'Runs in the foreground until interrupted. git pushes and fetches on this machine then send their requests through it on open connections, and a push needs no listing while its view of the repository is current.',
  ],
  options: {
    socket: { type: 'string', value: 'PATH', help: 'listen here (default: agent.sock in the cache)' },
  },
  positionals: { min: 0, max: 0 },
  async run({ ctx, io, args }) {
    // The agent talks to PDSes itself: its own context must not route through an agent.
    const own = new Context(ctx().config, { agent: false });
    const socket = stringOption(args, 'socket') ?? own.config.agentSocket;
    const agent = await startAgent(own, socket, (line) => io.err(`knotless agent: ${line}`));
    const stop = (): void => {
      void agent.close().then(() => process.exit(0));
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    io.out(`knotless agent listening on ${socket}`);
    io.out('ready');
    await new Promise<never>(() => {});
  },
};
