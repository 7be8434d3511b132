// PDS faults under a push that goes through the warm agent: the agent forwards the
// helper's requests to the fault proxy. Every push must land and be acknowledged, or be reported
// failed; never acknowledged without its write. A write the PDS failed or refused through the agent
// must drop the agent's view of that repository, so that the next push lists.
import path from 'node:path';
import type { FaultRule } from 'knotless-devnet';
import { agentView, spawnAgent } from '../helpers/agent.ts';
import { commitFiles, newRepo } from '../helpers/git.ts';
import { lastLine, onTable, type FaultCase } from './checks.ts';
import type { FaultEnv } from './env.ts';

const PUT = 'com.atproto.repo.putRecord';

/** Waits (bounded, 60 s: a guard, not a speed claim) until the agent answers from a current view. */
async function viewReady(socket: string, q: { did: string; repo: string; pds: string }): Promise<boolean> {
  for (let i = 0; i < 300; i++) {
    if ((await agentView(socket, q)) !== null) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

function agentPushUnder(name: string, rule: FaultRule, lands: boolean, resent = false): FaultCase {
  return {
    group: 'pds',
    name: `agent: ${name}`,
    expected: `${lands ? 'push ok; remote at the new commit' : 'push failed; remote unchanged'}; ${resent ? 'view dropped, or kept at the new commit' : 'view dropped'}`,
    async run(env: FaultEnv) {
      const socket = path.join(env.alice.dir(), 'agent.sock');
      const agent = await spawnAgent(socket, {
        ...env.alice.env,
        KNOTLESS_COMPACT: '0',
        KNOTLESS_SERVICE: env.proxy.url,
      });
      try {
        return await env.withEnv({ KNOTLESS_AGENT_SOCKET: socket }, async () => {
          const { url, name: repo } = await env.repo('agent');
          const dir = await newRepo(env.alice, url);
          await commitFiles(env.alice, dir, { 'a.txt': 'one\n' }, 'one');
          await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
          const q = { did: env.did, repo, pds: env.t.net.pdsUrl };
          if (!(await viewReady(socket, q))) return 'the agent never had a view';
          const before = (await env.alice.ok(dir, 'ls-remote', url, 'refs/heads/main')).split('\t')[0];
          const next = await commitFiles(env.alice, dir, { 'a.txt': 'two\n' }, 'two');
          env.proxy.inject(rule);
          const res = await env.alice.git(dir, 'push', '-q', 'origin', 'main');
          env.proxy.clearFaults();
          const after = (await env.alice.ok(dir, 'ls-remote', url, 'refs/heads/main')).split('\t')[0];
          const facts = [res.code === 0 ? 'push ok' : 'push failed'];
          if (res.code === 0 && after !== next) facts.push(`acknowledged but the remote is at ${after}`);
          else
            facts.push(
              after === next
                ? 'remote at the new commit'
                : after === before
                  ? 'remote unchanged'
                  : `remote at ${after}`,
            );
          if (res.code !== 0 && lands) facts.push(lastLine(res.stderr));
          const dropped = new RegExp(`dropped the view of ${env.did}/${repo}: `).test(agent.log());
          // A drop the PDS never saw may be resent by the agent's pool on another idle connection,
          // twice when two are open: then the agent saw no failure, and the view it kept must be
          // true, holding the commit that landed.
          if (dropped) facts.push(resent ? 'view dropped, or kept at the new commit' : 'view dropped');
          else if (!resent) facts.push('view kept');
          else {
            // No confirmed view (the next push lists) is as safe as a dropped one.
            const view = await agentView(socket, q);
            const kept = view?.get('refs/heads/main')?.target;
            facts.push(
              view === null || kept === next
                ? 'view dropped, or kept at the new commit'
                : `view kept at ${kept ?? 'nothing'}`,
            );
          }
          return facts.join('; ');
        });
      } finally {
        await agent.stop();
      }
    },
  };
}

/** Every agent-forwarding case. */
export const AGENT_CASES: FaultCase[] = [
  agentPushUnder('putRecord answers 503 once', { nsid: PUT, fault: { kind: 'status', status: 503 } }, true),
  // Twice: a dropped reused connection is resent at once on another (the PDS never saw it); the
  // second drop is a failure the agent sees, unless that one was a reused connection too.
  agentPushUnder(
    'putRecord connection dropped twice',
    { nsid: PUT, times: 2, fault: { kind: 'drop' } },
    true,
    true,
  ),
  agentPushUnder(
    'putRecord answer cut after the write',
    { nsid: PUT, fault: { kind: 'cut', bytes: 20 } },
    true,
  ),
  agentPushUnder(
    'putRecord answers 503 every time',
    { nsid: PUT, times: Infinity, fault: { kind: 'status', status: 503 } },
    false,
  ),
];

/** The same on a ref table (the default layout): a ref record's write and a table's are both a putRecord. */
export const TABLE_AGENT_CASES: FaultCase[] = AGENT_CASES.map((c) => onTable(c));
