import { agentSocket } from '../../agent/autostart.ts';
import { startGitSpawner } from '../../agent/git-spawner.ts';
import { keepObjectsInMemoryOnly } from 'knotless-core/packs/pack-objects-memo';
import { startAgent } from '../../agent/server.ts';
import { restartWithNodeFlags } from '../../agent/node-flags.ts';
import { SPAWNER_SCRIPT } from '../../paths.ts';
import { Context } from '../../context.ts';
import { KnotlessError } from 'knotless-core/errors';
import { safeText } from 'knotless-core/text/terminal';
import { stringOption, type Command } from '../command.ts';

export const command: Command = {
  name: 'agent',
  args: '',
  summary: 'keep PDS connections warm and repository views current for git',
  details: [
    'Runs in the foreground until interrupted. git pushes and fetches on this machine then send their requests through it on open connections, and a push needs no listing while its view of the repository is current.',
    'You rarely need to run it: the first push starts one in the background (`--auto`), which exits after KNOTLESS_AGENT_IDLE seconds without a request (600 by default). KNOTLESS_AGENT=0 turns it off.',
  ],
  options: {
    socket: {
      type: 'string',
      value: 'PATH',
      help: "listen here (default: this build's socket in the agent's directory)",
    },
    auto: {
      type: 'boolean',
      help: 'started by knotless: exit when idle, and quietly when another agent already listens',
    },
    warm: { type: 'string', value: 'DID/REPO', help: 'list this repository at once, for the next push' },
  },
  positionals: { min: 0, max: 0 },
  async run({ ctx, io, args }) {
    const auto = args.values['auto'] === true;
    // A started agent's lines go to its log file: each says when.
    const log = (line: string): void =>
      io.err(`${auto ? `${new Date().toISOString()} ` : ''}knotless agent ${process.pid}: ${line}`);
    // First, before anything is opened: this process may be replaced by itself with Node's flags.
    restartWithNodeFlags(ctx().config.nodeOptions, log);
    // The agent talks to PDSes itself: its own context must not route through an agent.
    const own = new Context(ctx().config, { agent: false });
    const config = own.config;
    const byHand = stringOption(args, 'socket');
    const socket = byHand ?? agentSocket(config);
    const agent = await startAgent(own, socket, log, {
      idleMs: auto ? config.agentIdleMs : 0,
      // Only in the agent's own directory are the other sockets agents of other builds.
      retireOthers: byHand === undefined && config.agentSocket === undefined,
      drainMs: config.httpTimeoutMs + 5000,
      exit: () => {
        own.close();
        process.exit(0);
      },
    });
    if (agent === undefined) {
      if (auto) return log(`another agent already listens at ${socket}; this one is not needed`);
      throw new KnotlessError(
        'usage',
        `An agent already listens at ${socket}; stop it first (\`knotless agent stop\`) or choose another --socket.`,
      );
    }
    process.once('SIGINT', () => agent.stop('interrupted'));
    process.once('SIGTERM', () => agent.stop('terminated'));
    log(`listening on ${socket}`);
    startGitSpawner(SPAWNER_SCRIPT, log);
    keepObjectsInMemoryOnly();
    const warm = stringOption(args, 'warm');
    if (warm !== undefined) {
      const slash = warm.indexOf('/');
      own.resolver
        .resolve(warm.slice(0, slash))
        .then((owner) => agent.warm(owner, warm.slice(slash + 1)))
        .catch((err: unknown) => log(`warming ${safeText(warm)}: ${safeText(String(err))}`));
    }
    io.out(`knotless agent listening on ${socket}`);
    io.out('ready');
    await new Promise<never>(() => {});
  },
};
