/**
 * Waiting in tests for something another process does (an appview indexing, an agent's view
 * catching up, a background compaction ending), with no clock of its own: how long that takes
 * depends on the machine's load, and a bound that holds on a quiet machine fails on a busy one. A
 * wait that never ends is caught by the test runner's own per-file guard; so that its report says
 * what was awaited, the wait says so on stderr once a minute, with the last error its check threw.
 */

/** How often a long wait says what it waits for. */
const REPORT_EVERY_MS = 60_000;

/**
 * Calls `check` every `pollMs` until it returns a value other than undefined, and returns that. An
 * error `check` throws is taken as "not yet" (a server still starting refuses connections) and is
 * named in the wait's next report.
 */
export async function waitUntil<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  pollMs = 100,
): Promise<T> {
  const started = Date.now();
  let reported = started;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() - reported >= REPORT_EVERY_MS) {
      reported = Date.now();
      const why = last instanceof Error ? ` (last: ${last.message})` : '';
      process.stderr.write(
        `# still waiting for ${what} after ${Math.round((reported - started) / 1000)} s${why}\n`,
      );
    }
    await new Promise((r) => setTimeout(r, pollMs));
  }
}
