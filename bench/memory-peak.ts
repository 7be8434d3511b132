// `node --test bench/memory-peak.ts` (after `npm run build`): peak memory of the helper and of the agent
// for a push and cold clones of a repository of random 1 MiB files, MEM_SIZES MiB of them (default
// 22; e.g. MEM_SIZES=22,200), on the test network (plain http), directly and through `knotless agent`
// (MEM_AGENT=0 skips it). Prints one `MEM` line per size. See docs/reference/performance.md, "Memory".
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { spawnAgent } from '../packages/knotless/test/helpers/agent.ts';
import { commitFiles, newRepo, repoMaker, useGitUser } from '../packages/knotless/test/helpers/git.ts';
import { useNetwork } from '../packages/knotless/test/helpers/network.ts';

const sizes = (process.env['MEM_SIZES'] ?? '22').split(',').map(Number);
const t = useNetwork(['alice.test']);
let more: Record<string, string> = {};
const alice = useGitUser(t, 'alice.test', () => ({ KNOTLESS_AGENT: '0', KNOTLESS_COMPACT: '0', ...more }));
const createRepo = repoMaker(alice, 'alice.test', 'mem');
const peak = (s: string) => Number(/memory peak (\d+) MiB/.exec(s)?.[1]);
const hwm = (pid: number) =>
  Math.round(Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024);

describe('memory', () => {
  for (const mib of sizes)
    it(`${mib} MiB`, async () => {
      const url = await createRepo();
      const dir = await newRepo(alice, url);
      const files: Record<string, Uint8Array> = {};
      for (let i = 0; i < mib; i++) files[`f${i}.bin`] = crypto.randomBytes(1024 * 1024);
      await commitFiles(alice, dir, files, 'random');
      more = { KNOTLESS_TRACE: '1' };
      const push = await alice.git(dir, 'push', 'origin', 'main');
      assert.equal(push.code, 0, push.stderr);
      const out: string[] = [`push ${peak(push.stderr)}`];
      const cache = path.join(alice.env['KNOTLESS_CACHE_DIR']!, 'blobs');
      for (let r = 0; r < 2; r++) {
        fs.rmSync(cache, { recursive: true, force: true });
        const c = await alice.git(alice.dir(), 'clone', '-q', url, 'c');
        assert.equal(c.code, 0, c.stderr);
        out.push(`clone ${peak(c.stderr)}`);
      }
      if (process.env['MEM_AGENT'] !== '0') {
        const socket = path.join(t.tmpdir(), 'a.sock');
        const agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_COMPACT: '0' });
        try {
          more = { KNOTLESS_TRACE: '1', KNOTLESS_AGENT_SOCKET: socket, KNOTLESS_AGENT: '1' };
          out.push(`agent-start ${hwm(agent.child.pid!)}`);
          for (let r = 0; r < 2; r++) {
            fs.rmSync(cache, { recursive: true, force: true });
            const c = await alice.git(alice.dir(), 'clone', '-q', url, 'c');
            assert.equal(c.code, 0, c.stderr);
            out.push(`agent-clone helper ${peak(c.stderr)} agent ${hwm(agent.child.pid!)}`);
          }
          fs.writeFileSync(path.join(dir, 'g.bin'), crypto.randomBytes(mib * 1024 * 1024));
          await alice.ok(dir, 'add', '.');
          await alice.ok(dir, 'commit', '-qm', 'more');
          const p = await alice.git(dir, 'push', 'origin', 'main');
          assert.equal(p.code, 0, p.stderr);
          out.push(`agent-push helper ${peak(p.stderr)} agent ${hwm(agent.child.pid!)}`);
        } finally {
          await agent.stop();
        }
      }
      more = {};
      process.stderr.write(`MEM ${mib} MiB: ${out.join(' | ')}\n`);
    });
});
