// `node --test bench/agent-memory.ts` (after `npm run build`): the warm agent's memory across pushes
// through it, on the test network (plain http). Starts `knotless agent`, then pushes a one-line change
// (the first push through the agent: its event stream and view start), then AGENT_MEM_SIZES MiB
// (default 4,32) of random bytes each; prints the agent's VmRSS and VmHWM (from /proc) after each, and
// its CPU time. See docs/reference/performance.md, "Memory as the pack grows".
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { spawnAgent } from '../packages/knotless/test/helpers/agent.ts';
import { commitFiles, newRepo, repoMaker, useGitUser } from '../packages/knotless/test/helpers/git.ts';
import { useNetwork } from '../packages/knotless/test/helpers/network.ts';

const sizes = (process.env['AGENT_MEM_SIZES'] ?? '4,32').split(',').map(Number);
const t = useNetwork(['alice.test']);
let more: Record<string, string> = {};
const alice = useGitUser(t, 'alice.test', () => ({ KNOTLESS_COMPACT: '0', ...more }));
const createRepo = repoMaker(alice, 'alice.test', 'agentmem');

function mem(pid: number): string {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)![1]);
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const cpu = (Number(stat[11]) + Number(stat[12])) / 100;
  return `rss ${Math.round(kib('VmRSS') / 1024)} hwm ${Math.round(kib('VmHWM') / 1024)} cpu ${cpu.toFixed(2)}s`;
}

describe('agent memory', () => {
  it('pushes through the agent', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    await commitFiles(alice, dir, { 'a.txt': 'one\n' }, 'first');
    more = { KNOTLESS_AGENT: '0' };
    await alice.ok(dir, 'push', '-q', 'origin', 'main');
    const socket = path.join(t.tmpdir(), 'a.sock');
    const agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_COMPACT: '0' });
    const pid = agent.child.pid!;
    const out: string[] = [`start: ${mem(pid)}`];
    try {
      more = { KNOTLESS_AGENT_SOCKET: socket, KNOTLESS_AGENT: '1' };
      for (let i = 0; i < 3; i++) {
        await commitFiles(alice, dir, { 'a.txt': `line ${i}\n` }, `small ${i}`);
        const p = await alice.git(dir, 'push', '-q', 'origin', 'main');
        assert.equal(p.code, 0, p.stderr);
        out.push(`small push ${i}: ${mem(pid)}`);
      }
      for (const mib of sizes) {
        await commitFiles(
          alice,
          dir,
          { [`r${mib}.bin`]: crypto.randomBytes(mib * 1024 * 1024) },
          `${mib} MiB`,
        );
        const p = await alice.git(dir, 'push', '-q', 'origin', 'main');
        assert.equal(p.code, 0, p.stderr);
        out.push(`${mib} MiB push: ${mem(pid)}`);
      }
    } finally {
      await agent.stop();
      more = {};
    }
    process.stderr.write(`AGENTMEM\n  ${out.join('\n  ')}\n`);
  });
});
