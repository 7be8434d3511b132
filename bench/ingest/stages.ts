// Where a knotless record's time to its page goes: the appview's trace lines (KNOTLESS_SERVE_TRACE=1,
// packages/knotless-serve/src/trace.ts) matched to the bench's own send and page times, per stage.
import { percentile } from '../stats.ts';

/** What the bench knows of one checked write. */
export interface Checked {
  kind: string;
  seq: number;
  /** `did/repo` for a push (its mirror's trace key), else undefined. */
  mirrorKey: string | undefined;
  sentAt: number;
  visibleAt: number;
}

/** Collects the appview's trace lines as they arrive on its stderr. */
export class TraceLines {
  readonly #byKey = new Map<string, Map<string, number[]>>();
  #rest = '';

  /** Feeds a piece of stderr; returns what was not a trace line. */
  feed(chunk: string): string {
    const text = this.#rest + chunk;
    const lines = text.split('\n');
    this.#rest = lines.pop() ?? '';
    const other: string[] = [];
    for (const line of lines) {
      const m = /^trace (\S+) (\S+) ([\d.]+)$/.exec(line);
      if (m === null) {
        other.push(line);
        continue;
      }
      const stages = this.#byKey.get(m[2]!) ?? new Map<string, number[]>();
      this.#byKey.set(m[2]!, stages);
      const list = stages.get(m[1]!) ?? [];
      list.push(Number(m[3]));
      stages.set(m[1]!, list);
    }
    return other.length === 0 ? '' : other.join('\n') + '\n';
  }

  /** The first time `stage` of `key` was printed at or after `from`. */
  first(key: string | number, stage: string, from: number): number | undefined {
    return this.#byKey
      .get(String(key))
      ?.get(stage)
      ?.find((t) => t >= from);
  }
}

/** Each stage's p50 and p95 in ms, per kind of write: where the time to the page went. */
export function stageFigures(
  checked: Checked[],
  traces: TraceLines,
): Record<string, Record<string, { p50: number; p95: number; n: number }>> {
  const out: Record<string, Record<string, number[]>> = {};
  for (const c of checked) {
    const spans: Record<string, number> = {};
    const frame = traces.first(c.seq, 'frame', c.sentAt - 1);
    const indexed = traces.first(c.seq, 'indexed', c.sentAt - 1);
    if (frame === undefined || indexed === undefined) continue;
    spans['send_to_frame'] = frame - c.sentAt;
    spans['frame_to_indexed'] = indexed - frame;
    // A sync starts as the record is indexed, before the frame's handling ends.
    let last = frame;
    if (c.mirrorKey !== undefined) {
      for (const stage of ['mirror-start', 'packs', 'index-pack', 'refs', 'mirror-done']) {
        const t = traces.first(c.mirrorKey, stage, last);
        if (t === undefined) continue;
        spans[`to_${stage}`] = t - last;
        last = t;
      }
    }
    spans['to_page'] = c.visibleAt - Math.max(last, indexed);
    spans['total'] = c.visibleAt - c.sentAt;
    const kind = (out[c.kind] ??= {});
    for (const [k, v] of Object.entries(spans)) (kind[k] ??= []).push(v);
  }
  return Object.fromEntries(
    Object.entries(out).map(([kind, spans]) => [
      kind,
      Object.fromEntries(
        Object.entries(spans).map(([k, v]) => [
          k,
          { p50: Math.round(percentile(v, 50)), p95: Math.round(percentile(v, 95)), n: v.length },
        ]),
      ),
    ]),
  );
}
