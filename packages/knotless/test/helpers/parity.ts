import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { agentView, spawnAgent, type RunningAgent } from './agent.ts';
import { commitFiles, useGitUser, type GitUser } from './git.ts';
import { useNetwork, type TestNet } from './network.ts';

// Differential tests (git-parity*.test.ts): the same git commands against a bare repository
// (file://, so that git runs receive-pack and upload-pack as with any server) and against knotless,
// whose outcomes must be the same: exit status, what `--porcelain` prints per ref, the refs after.

/** Marks a step of {@link Parity.both} that the other machine runs. */
export const OTHER = '(other machine)';
/**
 * A step of {@link Parity.both} that prints nothing: through the agent, it waits until the agent's
 * view of the repository is the remote as it is (its event stream has delivered every write), so
 * that the steps after it are answered from a view that has caught up. Elsewhere it does nothing.
 */
export const CAUGHT_UP = '(agent caught up)';

/** One file's users, remotes and comparison. */
export interface Parity {
  t: TestNet;
  /** Pushes without an agent. */
  plain: GitUser;
  /** Pushes through its warm agent (started by {@link ready}). */
  warm: GitUser;
  /** Another machine of the same account, with its own cache. */
  other: GitUser;
  /** The proxy every request of `plain` and `warm` goes through. */
  proxy: () => Proxy;
  ready: (user: GitUser) => Promise<void>;
  /** Asserts that these requests (from the proxy's log) all came on the agent's own connections. */
  carriedByAgent: (requests: Proxy['requests']) => void;
  /** Stops the agent: call it in a describe's `after`, before the network closes. */
  stopAgent: () => Promise<void>;
  remotes: (user: GitUser) => Promise<{ bare: string; knotless: string }>;
  lsRemote: (user: GitUser, url: string) => Promise<string>;
  /**
   * Runs `steps` (each a git command line; `URL` is the remote; a step starting with OTHER runs on
   * the other machine) in a new repository with one commit, once against each remote, and returns
   * both transcripts with the remotes' refs after.
   */
  both: (
    user: GitUser,
    steps: (repo: string) => string[][],
    setup?: (user: GitUser, dir: string) => Promise<void>,
  ) => Promise<{ bare: string; knotless: string; stderr: string[] }>;
}

/**
 * Sets up the network, the proxy and the three users for the calling test file; `extra` is added to
 * every user's environment and the agent's.
 */
export function useParity(extra: NodeJS.ProcessEnv = {}): Parity {
  const t = useNetwork(['alice.test']);
  let proxy: Proxy | undefined;
  let socket = '';
  let agent: RunningAgent | undefined;
  const via = () => (proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url });
  // Fixed dates: both runs of a scenario make the same commits, so their transcripts can be compared.
  const DATES = { GIT_AUTHOR_DATE: '1577836800 +0000', GIT_COMMITTER_DATE: '1577836800 +0000' };
  const plain = useGitUser(t, 'alice.test', () => ({
    ...DATES,
    KNOTLESS_AGENT: '0',
    KNOTLESS_COMPACT: '0',
    ...extra,
    ...via(),
  }));
  const warm = useGitUser(t, 'alice.test', () => ({
    ...DATES,
    KNOTLESS_AGENT_SOCKET: socket,
    KNOTLESS_COMPACT: '0',
    ...extra,
    ...via(),
  }));
  // Another machine of the same account, with its own cache.
  const other = useGitUser(t, 'alice.test', () => ({
    KNOTLESS_AGENT: '0',
    KNOTLESS_COMPACT: '0',
    ...extra,
  }));

  before(async () => {
    await t.ready;
    // The agent's connections are told apart, so that a run through it proves the agent carried it.
    proxy = await startProxy({ target: t.net.pdsUrl, watchPids: () => (agent ? [agent.child.pid!] : []) });
    socket = path.join(t.tmpdir(), 'agent.sock');
  });
  after(() => proxy?.close());

  /** Makes sure `user` can run: the warm user's agent is started on first use. */
  async function ready(user: GitUser): Promise<void> {
    if (user === warm) agent ??= await spawnAgent(socket, { ...warm.env, KNOTLESS_COMPACT: '0', ...via() });
  }

  let n = 0;
  /** A fresh remote of each kind: a bare repository's file:// URL and a new knotless repository's. */
  async function remotes(user: GitUser): Promise<{ bare: string; knotless: string }> {
    const dir = user.dir();
    await user.ok(dir, 'init', '-q', '--bare', 'r.git');
    const name = `parity-${++n}`;
    const made = await user.knotless('repo', 'create', name);
    assert.equal(made.code, 0, made.stderr);
    return { bare: `file://${dir}/r.git`, knotless: `knotless://alice.test/${name}` };
  }

  /** What a command did, as a comparison sees it: its status and stdout, the remote's URL made neutral. */
  async function outcome(
    user: GitUser,
    cwd: string,
    url: string,
    ...args: string[]
  ): Promise<{ text: string; stderr: string }> {
    const res = await user.git(cwd, ...args.map((a) => (a === 'URL' ? url : a)));
    const shown = args.join(' ').replaceAll(cwd, 'DIR');
    // git's own warnings (an empty clone, a HEAD naming a missing branch) are part of the outcome.
    const warnings = res.stderr.split('\n').filter((l) => l.startsWith('warning: '));
    const stdout = res.stdout.replaceAll(url, 'URL').replaceAll(cwd, 'DIR');
    return {
      text: `$ git ${shown} -> ${res.code}\n${stdout}${warnings.map((w) => `${w}\n`).join('')}`,
      stderr: res.stderr,
    };
  }

  /** The remote's refs ("oid ref" lines, HEAD included), as `git ls-remote` shows them. */
  async function lsRemote(user: GitUser, url: string): Promise<string> {
    return user.ok(user.dir(), 'ls-remote', url);
  }

  /**
   * Runs `steps` (each a git command line; `URL` is the remote) in a new repository with one commit,
   * once against each remote, and returns both transcripts with the remotes' refs after.
   */
  async function both(
    user: GitUser,
    steps: (repo: string) => string[][],
    setup: (user: GitUser, dir: string) => Promise<void> = async () => {},
  ): Promise<{ bare: string; knotless: string; stderr: string[] }> {
    const urls = await remotes(user);
    const out = { bare: '', knotless: '', stderr: [] as string[] };
    for (const kind of ['bare', 'knotless'] as const) {
      const url = urls[kind];
      const dir = user.dir();
      await user.ok(dir, 'init', '-q');
      await user.ok(dir, 'remote', 'add', 'origin', url);
      await commitFiles(user, dir, { a: '1' }, 'one');
      await setup(user, dir);
      const from = proxy!.requests.length;
      // A step starting with OTHER runs on the other machine (its own cache and agent-less).
      for (const step of steps(dir)) {
        if (step[0] === CAUGHT_UP) {
          if (kind === 'knotless' && user === warm) await caughtUp(url);
          continue;
        }
        const [by, args] = step[0] === OTHER ? [other, step.slice(1)] : [user, step];
        const { text, stderr } = await outcome(by, dir, url, ...args);
        out[kind] += text;
        if (kind === 'knotless') out.stderr.push(stderr);
      }
      out[kind] += `== refs\n${await lsRemote(user, url)}`;
      if (kind === 'knotless' && user === warm) carriedByAgent(proxy!.requests.slice(from));
    }
    return out;
  }

  /** Waits (bounded) until the agent's view of the knotless repository at `url` is the remote's refs. */
  async function caughtUp(url: string): Promise<void> {
    const q = { did: t.dids['alice.test']!, repo: url.split('/').pop()!, pds: t.net.pdsUrl };
    const listed = (text: string) =>
      text
        .split('\n')
        .filter((l) => l !== '' && !l.endsWith('\tHEAD') && !l.includes('^{}'))
        .map((l) => `${l.split('\t')[1]} ${l.split('\t')[0]}`)
        .sort()
        .join('\n');
    const want = listed(await lsRemote(other, url));
    let seen = '';
    for (let i = 0; i < 150; i++) {
      const view = await agentView(socket, q);
      seen = [...(view ?? new Map<string, { target?: string }>())]
        .filter(([ref]) => ref !== 'HEAD')
        .map(([ref, r]) => `${ref} ${r.target ?? ''}`)
        .sort()
        .join('\n');
      if (view !== null && seen === want) return;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(seen, want, "the agent's view never caught up with the remote");
  }

  /** Every request a run through the agent made reached the PDS on the agent's own connections. */
  function carriedByAgent(requests: Proxy['requests']): void {
    assert.ok(requests.length > 0, 'nothing reached the PDS');
    const direct = requests.filter((r) => r.pid === undefined || r.pid !== agent?.child.pid);
    assert.deepEqual(
      direct.map((r) => `${r.method} ${r.nsid ?? r.path}`),
      [],
      `${direct.length} of ${requests.length} requests went around the agent`,
    );
  }

  return {
    t,
    plain,
    warm,
    other,
    proxy: () => proxy!,
    ready,
    carriedByAgent,
    stopAgent: async () => agent?.stop(),
    remotes,
    lsRemote,
    both,
  };
}
