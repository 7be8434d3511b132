// Node's floor: what `node -e 0` costs with the Node that runs the bench, counted the way the swarm's
// CPU accounting counts a helper (process.cpuUsage at exit, from a preloaded script: every thread, from
// exec on). A figure per push says little about knotless on a machine of unknown speed; beside the
// floor measured in the same minutes it says how many Node start-ups it is worth.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { percentile } from './stats.ts';

const REPORT = `process.on('exit', () => { const u = process.cpuUsage(); require('node:fs').writeSync(1, String((u.user + u.system) / 1000)); });\n`;

/** CPU ms of each of `runs` runs of `node -e 0`. */
export function nodeFloorRuns(runs: number): number[] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-floor-'));
  try {
    const preload = path.join(dir, 'report.cjs');
    fs.writeFileSync(preload, REPORT);
    const out: number[] = [];
    for (let i = 0; i < runs; i++) {
      const text = execFileSync(process.execPath, [`--require=${preload}`, '-e', '0'], {
        encoding: 'utf8',
        // Nothing of the caller's: no NODE_OPTIONS (the accounting's own preload) to count twice.
        env: { PATH: process.env['PATH'] ?? '' },
      });
      const ms = Number(text);
      if (!Number.isFinite(ms) || ms <= 0)
        throw new Error(`node -e 0 reported its CPU as ${JSON.stringify(text)}`);
      out.push(ms);
    }
    return out;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The floor to print: the median CPU ms of runs of `node -e 0`, rounded to a millisecond. */
export function floorMs(runs: number[]): number {
  return Math.round(percentile(runs, 50));
}
