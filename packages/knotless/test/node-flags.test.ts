// The Node flags knotless starts its own processes with (NODE_FLAGS, src/paths.ts: a smaller young
// generation and one V8 worker thread, for a lower peak; performance.md, "A clone's memory") reach
// every way git's helper starts: the launcher's shell (KNOTLESS_THIN=node, or no Perl), the Perl thin
// helper handing the session to Node, and the warm agent a helper starts. Each runs for real, with a
// stub for Node (the helper's two paths) or the real Node running a stub for the agent's script,
// which record the command line they were given.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { readConfig } from 'knotless-core/config/env';
import { startAgentDetached } from '../src/agent/autostart.ts';
import { NODE_FLAGS, packageRoot } from '../src/paths.ts';
import { runProcess } from './helpers/cli.ts';
import { spawnAgent } from './helpers/agent.ts';

const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-node-flags-')));
after(() => fs.rmSync(root, { recursive: true, force: true }));
const launcher = path.join(packageRoot(), 'bin', 'git-remote-knotless');
const helperScript = path.join(packageRoot(), 'bin', 'git-remote-knotless.cjs');

/** What the launcher ran Node with, given `env` (one argument a line). */
async function launched(env: Record<string, string>): Promise<string[]> {
  const out = path.join(root, `argv-${Math.random().toString(36).slice(2)}`);
  const stub = path.join(root, 'node-stub');
  fs.writeFileSync(stub, `#!/bin/sh\nprintf '%s\\n' "$@" > "$KNOTLESS_TEST_OUT"\n`, { mode: 0o755 });
  const home = fs.mkdtempSync(path.join(root, 'home-'));
  const res = await runProcess(launcher, ['origin', 'knotless://alice.test/x'], {
    env: {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      HOME: home,
      KNOTLESS_NODE: stub,
      KNOTLESS_TEST_OUT: out,
      ...env,
    },
    cwd: home,
  });
  assert.equal(res.code, 0, res.stderr);
  return fs.readFileSync(out, 'utf8').trimEnd().split('\n');
}

describe("knotless's own processes start with NODE_FLAGS", () => {
  it('the launcher runs the Node helper with them (its shell)', async () => {
    assert.deepEqual(await launched({ KNOTLESS_THIN: 'node' }), [
      ...NODE_FLAGS,
      helperScript,
      'origin',
      'knotless://alice.test/x',
    ]);
  });

  it('the Perl thin helper hands the session to Node with them', async () => {
    // KNOTLESS_AGENT set: the Perl helper hands the session over before looking for an agent.
    assert.deepEqual(await launched({ KNOTLESS_AGENT: '0' }), [
      ...NODE_FLAGS,
      helperScript,
      'origin',
      'knotless://alice.test/x',
    ]);
  });

  it('a helper starts the warm agent with them', async () => {
    const home = fs.mkdtempSync(path.join(root, 'agent-'));
    const out = path.join(home, 'argv.json');
    const bin = path.join(home, 'agent-stub.cjs');
    fs.writeFileSync(
      bin,
      `const fs = require('node:fs');\nfs.writeFileSync(${JSON.stringify(`${out}.tmp`)}, JSON.stringify(process.execArgv));\nfs.renameSync(${JSON.stringify(`${out}.tmp`)}, ${JSON.stringify(out)});\n`,
    );
    const config = readConfig({ HOME: home, KNOTLESS_CACHE_DIR: path.join(home, 'cache') });
    const warned: string[] = [];
    startAgentDetached(config, { bin, warn: (m) => warned.push(m) });
    // Detached, it is not waited for: its file appears whole (renamed into place) once it ran.
    while (!fs.existsSync(out)) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.deepEqual(warned, []);
    assert.deepEqual(JSON.parse(fs.readFileSync(out, 'utf8')), NODE_FLAGS);
  });

  it('an agent started by hand takes them in its own process (the same pid), leaving a flag the user gave', async () => {
    /** The command line of the agent started with `extra` in its environment, once it is ready. */
    const commandLine = async (extra: Record<string, string>) => {
      const home = fs.mkdtempSync(path.join(root, 'by-hand-'));
      const agent = await spawnAgent(path.join(home, 'agent.sock'), {
        PATH: process.env['PATH'] ?? '/usr/bin:/bin',
        HOME: home,
        KNOTLESS_CACHE_DIR: path.join(home, 'cache'),
        ...extra,
      });
      try {
        // Read while it runs: the pid the test started is the agent serving, restarted in place.
        const argv = fs.readFileSync(`/proc/${agent.child.pid}/cmdline`, 'utf8').split('\0');
        assert.doesNotMatch(agent.log(), /runs without/);
        return argv;
      } finally {
        await agent.stop();
      }
    };
    const plain = await commandLine({});
    for (const flag of NODE_FLAGS) assert.ok(plain.includes(flag), `${flag} in ${plain.join(' ')}`);
    assert.equal(plain.filter((a) => a === 'agent').length, 1);
    const own = await commandLine({ NODE_OPTIONS: '--max-semi-space-size=4' });
    assert.ok(own.includes('--v8-pool-size=1'), own.join(' '));
    assert.ok(!own.some((a) => a.startsWith('--max-semi-space-size')), own.join(' '));
  });
});
