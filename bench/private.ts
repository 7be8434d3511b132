import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Client } from './client.ts';

/** MiB of random data each large push carries: its pack goes to blobs, encrypted or not. */
const LARGE_MIB = [8];

/**
 * The same operations on a plain and a private repository, one after the other: a small push, a
 * push of each of `largeMib` MiB of fresh data, one after the other (memory and encryption
 * throughput; several sizes show whether memory grows with the pack), and a clone with no pack
 * cached. Rows
 * `<op>-plain` and `<op>-private`; the report's ratio line divides them.
 */
export async function privateRound(
  client: Client,
  rtt: number,
  round: number,
  measure: (op: string, fn: () => ReturnType<Client['git']>) => Promise<void>,
  largeMib: number[] = LARGE_MIB,
): Promise<void> {
  for (const kind of ['plain', 'private'] as const) {
    const name = `${kind}-r${rtt}-${round}`;
    const url = `knotless://alice.test/${name}`;
    await client.knotless(rtt, ['repo', 'create', name, ...(kind === 'private' ? ['--private'] : [])]);
    const work = path.join(client.home, `work-${name}`);
    fs.mkdirSync(work);
    await client.git(rtt, work, ['init', '-q', '-b', 'main']);
    await client.git(rtt, work, ['remote', 'add', 'origin', url]);
    const change = async (file: string, bytes: Buffer | string) => {
      fs.writeFileSync(path.join(work, file), bytes);
      await client.git(rtt, work, ['add', '-A']);
      await client.git(rtt, work, ['commit', '-q', '-m', file]);
    };
    await change('a.txt', 'first\n');
    await client.git(rtt, work, ['push', '-q', 'origin', 'main']);
    await change('a.txt', 'second\n');
    await measure(`push-${kind}`, () => client.git(rtt, work, ['push', '-q', 'origin', 'main']));
    for (const mib of largeMib) {
      await change(`large-${mib}.bin`, crypto.randomBytes(mib * 1024 * 1024));
      await measure(`push-${mib}mib-${kind}`, () => client.git(rtt, work, ['push', '-q', 'origin', 'main']));
    }
    // Cold in packs, not in compiled code: both clones start as on a machine that ran knotless
    // before (a first private clone also compiles libsodium, some 10 ms more: docs/performance.md).
    const cache = client.coldCache({ compiled: true });
    await measure(`clone-${kind}`, () =>
      client.git(rtt, client.home, ['clone', '-q', url, path.join(client.home, `clone-${name}`)], {
        KNOTLESS_CACHE_DIR: cache,
      }),
    );
  }
}

/**
 * p50 of each private row over its plain twin, per RTT: what a private repository costs, in wall time
 * and in CPU time (user + system of the command's whole process tree), which a loaded machine
 * disturbs less.
 */
export function privateRatios(
  samples: { op: string; rtt: number; ms: number; cpuMs: number }[],
  rtts: number[],
): string {
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)] ?? NaN;
  const lines: string[] = [];
  for (const op of [...new Set(samples.map((s) => s.op))].filter((o) => o.endsWith('-private'))) {
    const plainOp = op.replace(/-private$/, '-plain');
    const cell = (r: number, f: (s: { ms: number; cpuMs: number }) => number) => {
      const p = median(samples.filter((s) => s.op === op && s.rtt === r).map(f));
      const q = median(samples.filter((s) => s.op === plainOp && s.rtt === r).map(f));
      return `${(p / q).toFixed(2)}× (${Math.round(p)}/${Math.round(q)} ms) @${r} ms`;
    };
    lines.push(
      `${op.replace(/-private$/, '')}: private / plain p50 wall ${rtts.map((r) => cell(r, (s) => s.ms)).join(', ')}; CPU ${rtts.map((r) => cell(r, (s) => s.cpuMs)).join(', ')}`,
    );
  }
  return lines.join('\n');
}
