// Faults under the agent's group commit: pushes whose ref writes share one applyWrites
// commit in the agent, while the agent is killed mid-batch, the PDS fails the batch, or the batch's
// answer is lost after it landed. Every push must land and be acknowledged, or be reported failed;
// none is acknowledged without its write.
//
// Each case makes the batch by construction: a first push's write is held at the PDS (alone: the
// agent sends a lone write as it came), the other pushes' writes then wait in the agent behind it
// (asked over its socket), and are released together as one commit.
import http from 'node:http';
import path from 'node:path';
import type { FaultRule } from 'knotless-devnet';
import { spawnAgent, type RunningAgent } from '../helpers/agent.ts';
import { commitFiles, newRepo } from '../helpers/git.ts';
import { onTable, type FaultCase } from './checks.ts';
import type { FaultEnv } from './env.ts';

const APPLY = 'com.atproto.repo.applyWrites';
const PUT = 'com.atproto.repo.putRecord';
const BRANCHES = ['g0', 'g1', 'g2', 'g3'];

/** Ref writes the agent holds for `did`, unanswered. */
async function pending(socket: string, did: string): Promise<number> {
  const body = await new Promise<string>((resolve, reject) => {
    http
      .get({ socketPath: socket, path: '/writes' }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve(text));
      })
      .on('error', reject);
  });
  return (JSON.parse(body) as Record<string, number>)[did] ?? 0;
}

/** Waits (bounded) for a condition the case depends on; false when it never came. */
async function until(check: () => boolean | Promise<boolean>): Promise<boolean> {
  for (let i = 0; i < 300; i++) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

/** A promise and the function that settles it. */
function gate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { open, opened };
}

/**
 * What happens around the batch: `rule` is scripted on the PDS when the batch is about to go (after
 * the first write, before the batch); `during` runs while the batch's commit is held at the PDS.
 */
interface Plan {
  /** The request that carries the batch: applyWrites of ref records, putRecord of a ref table. */
  batch: string;
  rule?: FaultRule;
  during?: (agent: RunningAgent) => Promise<void>;
}

function groupCase(name: string, plan: Plan, expected: string): FaultCase {
  return {
    group: 'pds',
    name: `group: ${name}`,
    expected,
    async run(env: FaultEnv) {
      const socket = path.join(env.alice.dir(), 'agent.sock');
      const agent = await spawnAgent(socket, {
        ...env.alice.env,
        KNOTLESS_COMPACT: '0',
        KNOTLESS_SERVICE: env.proxy.url,
      });
      try {
        return await env.withEnv({ KNOTLESS_AGENT_SOCKET: socket }, () =>
          batchUnder(env, socket, agent, plan),
        );
      } finally {
        if (agent.child.exitCode === null && agent.child.signalCode === null) await agent.stop();
      }
    },
  };
}

async function batchUnder(env: FaultEnv, socket: string, agent: RunningAgent, plan: Plan): Promise<string> {
  const { url } = await env.repo('group');
  const dir = await newRepo(env.alice, url);
  const base = await commitFiles(env.alice, dir, { 'a.txt': 'base\n' }, 'base');
  for (const b of BRANCHES) await env.alice.ok(dir, 'branch', b);
  await env.alice.ok(dir, 'push', '-q', url, 'main', ...BRANCHES);
  const want = new Map<string, string>();
  for (const b of BRANCHES) {
    await env.alice.ok(dir, 'checkout', '-q', '-b', `${b}-next`, base);
    want.set(b, await commitFiles(env.alice, dir, { [`${b}.txt`]: `${b}\n` }, b));
  }
  const push = (b: string) => env.alice.git(dir, 'push', url, `${b}-next:${b}`);

  // The first write alone, held at the PDS; the rest wait in the agent behind it.
  const first = gate();
  const batch = gate();
  env.proxy.inject({ method: 'POST', fault: { kind: 'hold', until: first.opened } });
  const lone = push(BRANCHES[0]!);
  const rest = BRANCHES.slice(1);
  const others: ReturnType<typeof push>[] = [];
  try {
    if (!(await until(async () => (await pending(socket, env.did)) >= 1)))
      return 'the first write never reached the agent';
    others.push(...rest.map(push));
    if (!(await until(async () => (await pending(socket, env.did)) >= BRANCHES.length)))
      return 'the writes never waited in the agent together';
    if (plan.during !== undefined)
      env.proxy.inject({ nsid: plan.batch, fault: { kind: 'hold', until: batch.opened } });
    if (plan.rule !== undefined) env.proxy.inject(plan.rule);
    first.open();
    if (plan.during !== undefined) {
      const held = await until(() =>
        env.proxy.faultsFired.some((f) => f.nsid === plan.batch && f.kind === 'hold'),
      );
      if (!held) return 'the batch never reached the PDS';
      await plan.during(agent);
    }
  } finally {
    first.open();
    batch.open();
  }
  const results = await Promise.all([lone, ...others]);
  const fired = env.proxy.faultsFired.some((f) => f.nsid === plan.batch);
  env.proxy.clearFaults();
  const tips = new Map(
    (await env.alice.ok(dir, 'ls-remote', url))
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split('\t').reverse() as [string, string]),
  );
  let landed = 0;
  let failed = 0;
  const wrong: string[] = [];
  BRANCHES.forEach((b, i) => {
    const r = results[i]!;
    const at = tips.get(`refs/heads/${b}`);
    if (r.code === 0 && at === want.get(b)) landed++;
    else if (r.code === 0) wrong.push(`${b} acknowledged but the remote is at ${at}`);
    else if (at === base) failed++;
    else wrong.push(`${b} reported failed but the remote is at ${at === want.get(b) ? 'its commit' : at}`);
  });
  const facts = [`${landed} of ${BRANCHES.length} acknowledged and landed`];
  if (failed > 0) facts.push(`${failed} reported failed`);
  facts.push(...wrong);
  if (plan.rule !== undefined || plan.during !== undefined)
    facts.push(fired ? 'the fault hit the batch' : 'the fault never hit the batch');
  return facts.join('; ');
}

/** The group-commit cases of one layout, whose batches go as `batch`. */
function groupCases(batch: string): FaultCase[] {
  const short = batch.split('.').pop()!;
  return [
    groupCase(
      'the agent killed while its batch is at the PDS',
      {
        batch,
        during: async (agent) => {
          const gone = new Promise((r) => agent.child.once('exit', r));
          agent.child.kill('SIGKILL');
          await gone;
        },
      },
      // The helpers meet a cut connection, retry without the agent, and find their writes landed.
      '4 of 4 acknowledged and landed; the fault hit the batch',
    ),
    groupCase(
      `${short} answers 503 once`,
      { batch, rule: { nsid: batch, fault: { kind: 'status', status: 503 } } },
      '4 of 4 acknowledged and landed; the fault hit the batch',
    ),
    groupCase(
      `${short} answer cut after the commit`,
      { batch, rule: { nsid: batch, fault: { kind: 'cut', bytes: 20 } } },
      '4 of 4 acknowledged and landed; the fault hit the batch',
    ),
    groupCase(
      `${short} connection dropped twice`,
      { batch, rule: { nsid: batch, times: 2, fault: { kind: 'drop' } } },
      '4 of 4 acknowledged and landed; the fault hit the batch',
    ),
  ];
}

/** Every group-commit case: the ref records' writes share one applyWrites. */
export const GROUP_CASES: FaultCase[] = groupCases(APPLY);

/** The same on a ref table (the default layout): the pushes fold into one putRecord of the table. */
export const TABLE_GROUP_CASES: FaultCase[] = groupCases(PUT).map((c) => onTable(c));
