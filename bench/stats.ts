/** This process's CPU (user and system) since `from`, in ms. */
export function cpuMs(from: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(from);
  return (d.user + d.system) / 1000;
}

/** The p-th percentile (0–100) of `values`, nearest-rank. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

/**
 * The least-squares slope of time against round-trip time: how many round trips an operation
 * costs as the network would charge them (connection set-up included).
 */
export function slope(points: Array<{ rtt: number; ms: number }>): number {
  const n = points.length;
  if (n < 2) return NaN;
  const mx = points.reduce((s, p) => s + p.rtt, 0) / n;
  const my = points.reduce((s, p) => s + p.ms, 0) / n;
  const sxx = points.reduce((s, p) => s + (p.rtt - mx) ** 2, 0);
  const sxy = points.reduce((s, p) => s + (p.rtt - mx) * (p.ms - my), 0);
  return sxx === 0 ? NaN : sxy / sxx;
}
