// The swarm's pushing side, in a process of its own (bench/swarm.ts starts it): each agent's loop of
// change, `git add`, `git commit`, `git push`, once a second. It runs apart from the bench's process
// because that process holds the PDS, PLC and links: every git command started from there forked
// the whole network's heap and held the PDS's event loop while git started, a cost no PDS has when
// its users push from their own machines. Reads its job as JSON on stdin; writes its result as JSON
// on stdout.
import fs from 'node:fs';
import path from 'node:path';
import { runMeasured } from './client.ts';

/** What the swarm asks of the driver. */
export interface DriverJob {
  /** One clone per agent, each on its own branch `agent-<i>`. */
  dirs: string[];
  seconds: number;
  /** Where measurement files go (the client's home). */
  home: string;
  /** Environment of `git add` and `git commit`; of `git push`. */
  loadEnv: Record<string, string>;
  pushEnv: Record<string, string>;
}

/** What the agents did. */
export interface DriverResult {
  attempted: number;
  landed: number;
  /** Push latencies (git push, start to end), in ms. */
  latencies: number[];
  failures: Record<string, number>;
  /** What git printed for the first failed push, if one failed. */
  sample?: string;
  /** From the first push started to the last one ended, in seconds. */
  elapsed: number;
  /** This process's own CPU (not its children's), ms. */
  cpuMs: number;
}

/** Names a failed push by what the user would read in it. */
function failureKind(stderr: string): string {
  if (/rate-limit/i.test(stderr)) return 'rate-limited';
  if (/fetch first|non-fast-forward/.test(stderr)) return 'rejected (remote moved)';
  if (/stale info/.test(stderr)) return 'stale info';
  if (/Could not reach|ECONN|timed out/i.test(stderr)) return 'unreachable';
  return 'other';
}

async function drive(job: DriverJob): Promise<DriverResult> {
  const result: DriverResult = { attempted: 0, landed: 0, latencies: [], failures: {}, elapsed: 0, cpuMs: 0 };
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  const deadline = started + job.seconds * 1000;
  await Promise.all(
    job.dirs.map(async (dir, i) => {
      const git = (args: string[], env: Record<string, string>) =>
        runMeasured('git', args, { cwd: dir, env, home: job.home });
      for (let n = 0; performance.now() < deadline; n++) {
        const tick = performance.now();
        fs.writeFileSync(path.join(dir, `agent-${i}.txt`), `push ${n}\n`);
        await git(['add', '-A'], job.loadEnv);
        await git(['commit', '-q', '-m', `agent ${i} push ${n}`], job.loadEnv);
        result.attempted++;
        try {
          const t = await git(['push', '-q', 'origin', `agent-${i}`], job.pushEnv);
          result.latencies.push(t.ms);
          result.landed++;
        } catch (err) {
          const kind = failureKind(String(err));
          result.failures[kind] = (result.failures[kind] ?? 0) + 1;
          result.sample ??= String(err)
            .split('\n')
            .filter((l) => /knotless:|error:|rejected/.test(l))
            .join(' / ');
        }
        const wait = tick + 1000 - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
    }),
  );
  result.elapsed = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu0);
  result.cpuMs = (used.user + used.system) / 1000;
  return result;
}

let input = '';
process.stdin.setEncoding('utf8').on('data', (d: string) => (input += d));
process.stdin.on('end', () => {
  drive(JSON.parse(input) as DriverJob).then(
    (r) => process.stdout.write(JSON.stringify(r)),
    (err: unknown) => {
      process.stderr.write(`swarm driver: ${String(err)}\n`);
      process.exitCode = 1;
    },
  );
});
