// What starting a process costs the process that starts it, against the memory it maps: Node forks
// the whole process for each child (libuv on Linux), so the cost grows with what it maps. This is
// why the warm agent starts its git commands from a small spawner process (knotless-core
// git/spawner). Prints, for each size, CPU and event-loop time per spawn of /bin/true.
//
//   node bench/spawn-cost.ts [--mib 0,128,256] [--runs 50]
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: { mib: { type: 'string', default: '0,128,256' }, runs: { type: 'string', default: '50' } },
});
const runs = Number(values.runs);
const held: unknown[] = [];

const once = (): Promise<void> =>
  new Promise((resolve, reject) => {
    const child = spawn('/bin/true', [], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', () => resolve());
  });

console.log('| extra MiB held | resident MiB | CPU ms per spawn | event loop blocked ms per spawn |');
console.log('| ---: | ---: | ---: | ---: |');
let holding = 0;
for (const mib of values.mib.split(',').map(Number)) {
  // Memory touched page by page, as a heap that grew holds it: buffers, and objects for the GC.
  for (; holding < mib; holding += 1) {
    held.push(Buffer.alloc(1 << 20, 1));
    held.push(Array.from({ length: 4096 }, (_, i) => ({ i })));
  }
  for (let i = 0; i < 5; i++) await once();
  const cpu0 = process.cpuUsage();
  let blocked = 0;
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const done = once();
    blocked += performance.now() - t0;
    await done;
  }
  const cpu = process.cpuUsage(cpu0);
  const rss = Math.round(process.memoryUsage().rss / (1 << 20));
  console.log(
    `| ${mib} | ${rss} | ${((cpu.user + cpu.system) / 1000 / runs).toFixed(2)} | ${(blocked / runs).toFixed(2)} |`,
  );
}
