import type { Command } from './command.ts';

/** Every command, by name; each module is loaded only when its command runs, to keep start-up fast. */
export const COMMANDS: Record<string, () => Promise<{ command: Command }>> = {
  login: () => import('./commands/login.ts'),
  logout: () => import('./commands/logout.ts'),
  whoami: () => import('./commands/whoami.ts'),
  'repo create': () => import('./commands/repo-create.ts'),
  'repo list': () => import('./commands/repo-list.ts'),
  'repo info': () => import('./commands/repo-info.ts'),
  'repo delete': () => import('./commands/repo-delete.ts'),
  'repo compact': () => import('./commands/repo-compact.ts'),
  'repo commit': () => import('./commands/repo-commit.ts'),
  dev: () => import('./commands/dev.ts'),
  agent: () => import('./commands/agent.ts'),
};

/** One line per command, for `knotless help`. */
export const SUMMARIES: Array<[string, string]> = [
  ['login <handle> [--app-password P]', 'log in to your account (prompts for the password)'],
  ['logout [handle]', 'log out and forget the session'],
  ['whoami', 'show the account commands act as'],
  ['repo create <name> [--description D]', 'create a repository in your account'],
  ['repo list [handle] [--json]', "list an account's repositories"],
  ['repo info <[handle/]name> [--json]', 'show one repository'],
  ['repo delete <name> [--yes]', 'delete a repository and all its refs'],
  ['repo compact <[handle/]name> [--ref R]...', 'merge small packs (also runs by itself after pushes)'],
  [
    'repo commit <[handle/]name> -m MSG [--branch B] [--add PATH=FILE]... [--delete PATH]...',
    'commit files without a clone',
  ],
  ['dev [--dir DIR]', 'run a local network (PLC + PDS) to try knotless on'],
  ['agent [--socket PATH]', 'keep connections warm and views current for git (opt-in)'],
];
