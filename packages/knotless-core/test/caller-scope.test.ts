import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { boundToCaller, currentCaller, forCaller, forThisProcess } from '../src/caller/scope.ts';

// The warm agent runs helpers' work for callers (their directory, environment and stderr) and its own
// work (views, event streams, group commits, its log) for everyone: the second must never take on
// the first's caller, even when a caller's request sets it going; a caller's callback it calls back
// must run for that caller.
describe("the caller's scope", () => {
  const caller = { env: { WHO: 'helper' }, cwd: '/helper', stderr: () => {} };

  it("runs the process's own work, and what it starts later, with no caller", async () => {
    const later = await forCaller(caller, async () => {
      assert.equal(currentCaller(), caller);
      const seen = forThisProcess(() => {
        assert.equal(currentCaller(), undefined);
        return new Promise<unknown>((resolve) => setTimeout(() => resolve(currentCaller()), 1));
      });
      // Back in the caller's work once the process's own call returns.
      assert.equal(currentCaller(), caller);
      return seen;
    });
    assert.equal(later, undefined);
  });

  it("runs a caller's callback for that caller when the process's own work calls it", async () => {
    let bound: (() => unknown) | undefined;
    forCaller(caller, () => {
      bound = boundToCaller(() => currentCaller());
    });
    const seen = await forThisProcess(
      () => new Promise<unknown>((resolve) => setTimeout(() => resolve(bound!()), 1)),
    );
    assert.equal(seen, caller);
    // Bound outside any caller's work, a function is left as it is.
    const plain = (): undefined => undefined;
    assert.equal(boundToCaller(plain), plain);
  });
});
