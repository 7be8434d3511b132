import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { after } from 'node:test';
import { KNOTLESS_BIN } from './cli.ts';

/** A `knotless runner` process, its stderr read line by line; killed after the file's tests. */
export class RunnerProcess {
  readonly child: ChildProcess;
  readonly lines: string[] = [];
  #partial = '';
  #waiters: Array<() => void> = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(args: string[], env: Record<string, string>) {
    this.child = spawn(process.execPath, [KNOTLESS_BIN, 'runner', ...args], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      const parts = (this.#partial + d).split('\n');
      this.#partial = parts.pop()!;
      this.lines.push(...parts);
      for (const w of this.#waiters.splice(0)) w();
    });
    this.exited = new Promise((resolve) =>
      this.child.on('exit', (code, signal) => {
        for (const w of this.#waiters.splice(0)) w();
        resolve({ code, signal });
      }),
    );
    running.add(this);
  }

  /** The first line matching `re` (waiting for it); fails if the runner exits first. */
  async line(re: RegExp): Promise<string> {
    for (;;) {
      const found = this.lines.find((l) => re.test(l));
      if (found !== undefined) return found;
      if (this.child.exitCode !== null || this.child.signalCode !== null)
        assert.fail(`the runner exited before printing ${re}:\n${this.lines.join('\n')}`);
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }
}

const running = new Set<RunnerProcess>();
after(() => {
  for (const r of running)
    if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
});

/** A fifo in `dir` the test writes to when a run may go on: a command waits on it, not on a clock. */
export async function fifo(dir: string, name: string): Promise<string> {
  const p = path.join(dir, name);
  const made = spawn('mkfifo', [p]);
  const code = await new Promise<number | null>((resolve) => made.on('exit', resolve));
  assert.equal(code, 0, `mkfifo ${p}`);
  return p;
}

/** An account's check records on `commit`, oldest first (straight from its PDS). */
export async function checkRecords(
  pds: string,
  did: string,
  commit: string,
): Promise<{ state: string; description?: string }[]> {
  const url = `${pds}/xrpc/com.atproto.repo.listRecords?repo=${did}&collection=dev.knotless.check&limit=100&reverse=true`;
  const body = (await (await fetch(url)).json()) as {
    records: { value: { commit: string; state: string; description?: string } }[];
  };
  return body.records
    .filter((r) => r.value.commit === commit)
    .map((r) => ({
      state: r.value.state,
      ...(r.value.description === undefined ? {} : { description: r.value.description }),
    }));
}
