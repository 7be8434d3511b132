// Per-stage timings of knotless records through the appview, for finding where a record's time to
// its page goes: with KNOTLESS_SERVE_TRACE=1 each stage prints one line to stderr,
// `trace <stage> <key> <epoch ms>`, the clock being the machine's (comparable across processes).
// Stages: `frame` (a frame not passed over arrived; key: its sequence number), `indexed` (its
// writes are in the index; key: seq), `mirror-start`, `packs` (downloaded), `indexed-packs`
// (`index-pack` done), `refs` (the mirror's refs moved: pages show the push); mirror stages are keyed
// `did/repo`. Off, it costs one boolean test per stage.

const on = process.env['KNOTLESS_SERVE_TRACE'] === '1';

/** The machine's clock in ms, with the precision of the monotonic one. */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

/** Whether tracing is on. */
export function tracing(): boolean {
  return on;
}

/** Prints one stage's line when tracing is on; `at` defaults to now. */
export function trace(stage: string, key: string | number, at: number = nowMs()): void {
  if (on) process.stderr.write(`trace ${stage} ${key} ${at.toFixed(1)}\n`);
}
