// What a command hands the agent it starts (agent/autostart.ts): none of git's variables, which name
// one repository, and not KNOTLESS_VERIFY, which turns checks off for one command only: an agent
// started by `KNOTLESS_VERIFY=0 git fetch` must not read unchecked for every command after it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { agentChildEnv } from '../src/config/env.ts';

describe("a started agent's environment", () => {
  it("leaves out git's variables and KNOTLESS_VERIFY, and keeps the rest", () => {
    assert.deepEqual(
      agentChildEnv({ GIT_DIR: '/r/.git', KNOTLESS_VERIFY: '0', KNOTLESS_CACHE_DIR: '/c', HOME: '/h' }),
      { KNOTLESS_CACHE_DIR: '/c', HOME: '/h' },
    );
  });
});
