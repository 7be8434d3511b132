import { AsyncLocalStorage } from 'node:async_hooks';

/** The reason a request's work is aborted when it runs out of time. */
export class RequestTimeout extends Error {
  override name = 'RequestTimeout';
}

// The request's abort signal travels with its async context rather than through every page
// function's parameters: each git process a page starts (src/mirror/read.ts) picks it up, so a
// request past its limit stops its work, not only its answer, without threading a signal by hand.
const current = new AsyncLocalStorage<AbortSignal>();

/** Runs `work` with `signal` as the current request's signal. */
export function withSignal<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
  return current.run(signal, work);
}

/** The signal of the request being answered, if any; aborted when it is out of time or abandoned. */
export function requestSignal(): AbortSignal | undefined {
  return current.getStore();
}
