import type { Command } from './command.ts';

/**
 * Every command, by the words that run it; each module loads only when its command runs (or help
 * lists it), to keep start-up fast. Usage and summaries live in the modules themselves.
 */
export const COMMANDS: Record<string, () => Promise<{ command: Command }>> = {
  login: () => import('./commands/login.ts'),
  logout: () => import('./commands/logout.ts'),
  whoami: () => import('./commands/whoami.ts'),
  'repo create': () => import('./commands/repo-create.ts'),
  'repo list': () => import('./commands/repo-list.ts'),
  'repo info': () => import('./commands/repo-info.ts'),
  'repo delete': () => import('./commands/repo-delete.ts'),
  'repo commit': () => import('./commands/repo-commit.ts'),
  'repo compact': () => import('./commands/repo-compact.ts'),
  agent: () => import('./commands/agent.ts'),
  'agent status': () => import('./commands/agent-status.ts'),
  'agent stop': () => import('./commands/agent-stop.ts'),
  dev: () => import('./commands/dev.ts'),
};

/** Words that only group subcommands (`knotless repo` lists its own). */
export const GROUPS: Record<string, string> = {
  repo: 'create, list, inspect, delete and commit to repositories',
};
