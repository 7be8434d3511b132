import type { Sample } from './ops.ts';
import { percentile, slope } from './stats.ts';

/** Figures for one operation, as `--json` writes them. */
export interface OpFigures {
  slope: number;
  /** Median requests that reached the server, background work (compaction) included. */
  requests: number;
  connections: number;
  /** Median record writes, write points and blob uploads, background included. */
  writes: number;
  points: number;
  uploads: number;
  /** Median peak resident memory of the operation's largest client process, MiB. */
  peak_mib: number;
  /** How many of it a bsky.social account can make within one hour's budget, and per hour all day long (see ACCOUNT). */
  per_hour: number | null;
  per_hour_all_day: number | null;
  p50_ms: Record<string, number>;
  p95_ms: Record<string, number>;
}

/** bsky.social's limits for one account: write points per hour and per day, blob uploads per day. */
export const ACCOUNT = { pointsPerHour: 5000, pointsPerDay: 35_000, uploadsPerDay: 1000 };

/** How many operations of this cost fit the account's budget: in one hour, and per hour over a day. */
function sustainable(points: number, uploads: number): { hour: number | null; allDay: number | null } {
  if (points === 0 && uploads === 0) return { hour: null, allDay: null };
  const fit = (budget: number, cost: number) => (cost === 0 ? Infinity : budget / cost);
  const hour = Math.min(fit(ACCOUNT.pointsPerHour, points), fit(ACCOUNT.uploadsPerDay, uploads));
  const day = Math.min(fit(ACCOUNT.pointsPerDay, points), fit(ACCOUNT.uploadsPerDay, uploads));
  return { hour: Math.floor(hour), allDay: Math.floor(day / 24) };
}

/** Groups samples by operation into the figures the report and `--json` show. */
export function summarise(samples: Sample[], rtts: number[]): Record<string, OpFigures> {
  const out: Record<string, OpFigures> = {};
  for (const op of [...new Set(samples.map((s) => s.op))]) {
    const mine = samples.filter((s) => s.op === op);
    const at = (rtt: number) => mine.filter((s) => s.rtt === rtt).map((s) => s.ms);
    const median = (f: (s: Sample) => number) => percentile(mine.map(f), 50);
    const budget = sustainable(
      median((s) => s.points),
      median((s) => s.uploads),
    );
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
      writes: median((s) => s.writes),
      points: median((s) => s.points),
      uploads: median((s) => s.uploads),
      peak_mib: median((s) => s.peakMib),
      per_hour: budget.hour,
      per_hour_all_day: budget.allDay,
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

/**
 * The whole cost of each operation at the PDS: requests, record writes, write points and blob
 * uploads (background compaction included), peak memory, and what a bsky.social account sustains.
 */
export function costTable(ours: Record<string, OpFigures>, peer: Record<string, OpFigures>): string {
  const head =
    '| operation | requests | record writes | write points | blob uploads | peak MiB | git smart HTTP peak MiB | in one hour | per hour, all day |';
  const rule = '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |';
  const n = (x: number) => String(Math.round(x * 100) / 100);
  const rows = Object.entries(ours).map(([op, f]) => {
    const p =
      peer[
        op
          .replace(/-agent$/, '')
          .replace(/-with-appview$/, '')
          .replace(/-warm$/, '')
      ];
    return `| ${op} | ${n(f.requests)} | ${n(f.writes)} | ${n(f.points)} | ${n(f.uploads)} | ${f.peak_mib} | ${p?.peak_mib ?? ''} | ${f.per_hour ?? '—'} | ${f.per_hour_all_day ?? '—'} |`;
  });
  return [head, rule, ...rows].join('\n');
}
