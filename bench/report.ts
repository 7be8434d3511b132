import type { Sample } from './ops.ts';
import { percentile, slope } from './stats.ts';

/** Figures for one operation, as `--json` writes them. */
export interface OpFigures {
  slope: number;
  requests: number;
  connections: number;
  p50_ms: Record<string, number>;
  p95_ms: Record<string, number>;
}

/** Groups samples by operation into the figures the report and `--json` show. */
export function summarise(samples: Sample[], rtts: number[]): Record<string, OpFigures> {
  const out: Record<string, OpFigures> = {};
  for (const op of [...new Set(samples.map((s) => s.op))]) {
    const mine = samples.filter((s) => s.op === op);
    const at = (rtt: number) => mine.filter((s) => s.rtt === rtt).map((s) => s.ms);
    out[op] = {
      slope: round1(slope(mine.map((s) => ({ rtt: s.rtt, ms: s.ms })))),
      requests: percentile(
        mine.map((s) => s.requests),
        50,
      ),
      connections: percentile(
        mine.map((s) => s.connections),
        50,
      ),
      p50_ms: Object.fromEntries(rtts.map((r) => [String(r), Math.round(percentile(at(r), 50))])),
      p95_ms: Object.fromEntries(rtts.map((r) => [String(r), Math.round(percentile(at(r), 95))])),
    };
  }
  return out;
}

function round1(n: number): number {
  return Math.round(n * 10) / 10;
}

/** A Markdown table of operations: requests, round trips (slope), p50 per RTT, and ratio to the peer. */
export function table(
  ours: Record<string, OpFigures>,
  peer: Record<string, OpFigures>,
  rtts: number[],
): string {
  const head = `| operation | requests | new conns | round trips | ${rtts.map((r) => `p50 (p95) @${r} ms`).join(' | ')} | git smart HTTP p50 @${rtts.at(-1)} | ratio |`;
  const rule = `| --- | ---: | ---: | ---: | ${rtts.map(() => '---:').join(' | ')} | ---: | ---: |`;
  const last = String(rtts.at(-1));
  const rows = Object.entries(ours).map(([op, f]) => {
    const base = op
      .replace(/-agent$/, '')
      .replace(/-with-appview$/, '')
      .replace(/-warm$/, '');
    const p = peer[base];
    const ratio = p === undefined ? '' : (f.p50_ms[last]! / p.p50_ms[last]!).toFixed(2);
    return `| ${op} | ${f.requests} | ${f.connections} | ${Number.isFinite(f.slope) ? f.slope : '—'} | ${cells(f, rtts)} | ${p?.p50_ms[last] ?? ''} | ${ratio} |`;
  });
  const peerRows = Object.entries(peer).map(
    ([op, f]) =>
      `| git smart HTTP: ${op} | ${f.requests} | ${f.connections} | ${Number.isFinite(f.slope) ? f.slope : '—'} | ${cells(f, rtts)} | | |`,
  );
  return [head, rule, ...rows, ...peerRows].join('\n');
}

function cells(f: OpFigures, rtts: number[]): string {
  return rtts.map((r) => `${f.p50_ms[String(r)]} (${f.p95_ms[String(r)]})`).join(' | ');
}
