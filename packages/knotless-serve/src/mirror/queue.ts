/**
 * At most `limit` tasks at once, urgent ones first: a push just seen on the stream (someone may be
 * looking for it) goes ahead of the catch-up of thousands of mirrors at start or after a gap, and a
 * burst of pushes runs a few at a time instead of starting every git process on the machine at once.
 */
export class Slots {
  readonly #limit: number;
  #busy = 0;
  readonly #urgent: (() => void)[] = [];
  readonly #later: (() => void)[] = [];

  constructor(limit: number) {
    this.#limit = Math.max(1, limit);
  }

  /** Runs `task` when a slot is free. */
  async run<T>(urgent: boolean, task: () => Promise<T>): Promise<T> {
    if (this.#busy >= this.#limit)
      await new Promise<void>((resolve) => (urgent ? this.#urgent : this.#later).push(resolve));
    else this.#busy++;
    try {
      return await task();
    } finally {
      // The slot passes straight to the next waiter, if any, so the count stays right.
      const next = this.#urgent.shift() ?? this.#later.shift();
      if (next !== undefined) next();
      else this.#busy--;
    }
  }

  /** Tasks waiting for a slot. */
  get waiting(): number {
    return this.#urgent.length + this.#later.length;
  }
}
