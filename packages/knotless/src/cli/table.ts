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
  'repo fork': () => import('./commands/repo-fork.ts'),
  'repo default-branch': () => import('./commands/repo-default-branch.ts'),
  'repo share': () => import('./commands/repo-share.ts'),
  'repo unshare': () => import('./commands/repo-unshare.ts'),
  'repo protect': () => import('./commands/repo-protect.ts'),
  'key list': () => import('./commands/key-list.ts'),
  'key export': () => import('./commands/key-export.ts'),
  'key import': () => import('./commands/key-import.ts'),
  'pr create': () => import('./commands/pr-create.ts'),
  'pr list': () => import('./commands/pr-list.ts'),
  'pr view': () => import('./commands/pr-view.ts'),
  'pr checkout': () => import('./commands/pr-checkout.ts'),
  'pr update': () => import('./commands/pr-update.ts'),
  'pr comment': () => import('./commands/pr-comment.ts'),
  'pr merge': () => import('./commands/pr-merge.ts'),
  'pr close': () => import('./commands/pr-close.ts'),
  'pr reopen': () => import('./commands/pr-reopen.ts'),
  'pr label': () => import('./commands/pr-label.ts'),
  'check set': () => import('./commands/check-set.ts'),
  'check list': () => import('./commands/check-list.ts'),
  runner: () => import('./commands/runner.ts'),
  'issue create': () => import('./commands/issue-create.ts'),
  'issue list': () => import('./commands/issue-list.ts'),
  'issue view': () => import('./commands/issue-view.ts'),
  'issue comment': () => import('./commands/issue-comment.ts'),
  'issue close': () => import('./commands/issue-close.ts'),
  'issue reopen': () => import('./commands/issue-reopen.ts'),
  'issue label': () => import('./commands/issue-label.ts'),
  'lfs install': () => import('./commands/lfs-install.ts'),
  'lfs transfer': () => import('./commands/lfs-transfer.ts'),
  cache: () => import('./commands/cache.ts'),
  'cache clear': () => import('./commands/cache-clear.ts'),
  agent: () => import('./commands/agent.ts'),
  'agent status': () => import('./commands/agent-status.ts'),
  'agent stop': () => import('./commands/agent-stop.ts'),
  dev: () => import('./commands/dev.ts'),
};

/** Words that only group subcommands (`knotless repo` lists its own). */
export const GROUPS: Record<string, string> = {
  repo: 'create, list, inspect, fork, delete and commit to repositories',
  pr: 'pull requests: propose, review, update, merge, close and reopen',
  issue: 'issues: open, list, comment on, close and reopen',
  check: "checks: a runner's verdict on a commit, and a commit's checks",
  lfs: 'Git LFS objects stored in the PDS: set up git-lfs, and its transfer agent',
  key: "this machine's key for private repositories: list, export, import",
};
