import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Slots } from '../src/mirror/queue.ts';

/** A task that runs until released, noting when it started. */
function gate(log: string[], name: string): { task: () => Promise<void>; open(): void } {
  let open: () => void = () => {};
  const released = new Promise<void>((r) => (open = r));
  return {
    task: async () => {
      log.push(name);
      await released;
    },
    open: () => open(),
  };
}

describe("the mirror's sync slots", () => {
  it('run at most their number at once, urgent waiters before earlier catch-up ones', async () => {
    const slots = new Slots(2);
    const started: string[] = [];
    const a = gate(started, 'a');
    const b = gate(started, 'b');
    const later = gate(started, 'later');
    const urgent = gate(started, 'urgent');
    const runs = [
      slots.run(false, a.task),
      slots.run(false, b.task),
      slots.run(false, later.task),
      slots.run(true, urgent.task),
    ];
    await Promise.resolve();
    assert.deepEqual(started, ['a', 'b']);
    assert.equal(slots.waiting, 2);
    a.open();
    await runs[0];
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, ['a', 'b', 'urgent']);
    b.open();
    await runs[1];
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, ['a', 'b', 'urgent', 'later']);
    urgent.open();
    later.open();
    await Promise.all(runs);
    assert.equal(slots.waiting, 0);
  });

  it('give a failed task its slot back, and its failure to its caller', async () => {
    const slots = new Slots(1);
    await assert.rejects(
      slots.run(true, () => Promise.reject(new Error('git failed'))),
      /git failed/,
    );
    let ran = false;
    await slots.run(false, () => {
      ran = true;
      return Promise.resolve();
    });
    assert.equal(ran, true);
  });
});
