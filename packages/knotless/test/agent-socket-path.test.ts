// Where the warm agent's socket is, as the two programs that look for it see it. The rule has one
// source: Node's (config/env.ts reads the environment, agent/autostart.ts's agentSocket names the
// socket). The thin helper in Perl (bin/git-remote-knotless) must find an agent where Node would, or
// not look at all and hand git's session to Node, which then applies the rule itself: it never looks
// anywhere else. Here both run for real over a matrix of environments, against a listener put where
// Node's rule says: the bundled CLI (`knotless agent status`, which asks the agent it finds) and the
// Perl script (which, answered 503, hands the session to "Node" as `direct`: a stub that records it).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { readConfig } from 'knotless-core/config/env';
import { agentSocket } from '../src/agent/autostart.ts';
import { packageRoot } from '../src/paths.ts';
import { runProcess } from './helpers/cli.ts';

const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-socket-path-')));
after(() => fs.rmSync(root, { recursive: true, force: true }));

const build = fs.readFileSync(path.join(packageRoot(), 'dist', 'build-id'), 'utf8').trim();
const script = path.join(packageRoot(), 'bin', 'git-remote-knotless');

/** Node's rule for this build: the bundle's, whose build id is dist/build-id's. */
function nodeSocket(env: Record<string, string>, cwd: string): string {
  const config = readConfig(env);
  const socket = config.agentSocket ?? path.join(path.dirname(agentSocket(config)), `${build}.sock`);
  return path.resolve(cwd, socket);
}

/** A listener at `socket` that records who asked what: /status answered, /helper refused (503). */
async function listen(socket: string): Promise<{ asked: string[]; close: () => Promise<void> }> {
  fs.mkdirSync(path.dirname(socket), { recursive: true, mode: 0o700 });
  const asked: string[] = [];
  const server = http.createServer((req, res) => {
    asked.push(`${req.method} ${req.url}`);
    req.resume();
    if (req.url === '/status') {
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          pid: process.pid,
          build,
          socket,
          startedAt: new Date(0).toISOString(),
          idleMs: 0,
          idleForMs: 0,
        }),
      );
    } else {
      res.statusCode = 503;
      res.end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, resolve);
  });
  fs.chmodSync(socket, 0o600);
  return {
    asked,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

let n = 0;

/** A fresh home, and the environment a case gives on top of it (`$H` is the home). */
function setUp(vars: Record<string, string | undefined>): { env: Record<string, string>; home: string } {
  const home = path.join(root, `h${n++}`);
  fs.mkdirSync(home, { mode: 0o700 });
  const env: Record<string, string> = { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: home };
  for (const [k, v] of Object.entries(vars)) {
    if (v === undefined) delete env[k];
    else env[k] = v.replaceAll('$H', home);
  }
  return { env, home };
}

/** How the Perl thin helper ended: the handoff it gave Node ('' for none). */
async function perlHandoff(env: Record<string, string>, cwd: string): Promise<string> {
  const out = path.join(cwd, `handoff-${n++}`);
  const stub = path.join(cwd, 'node-stub');
  fs.writeFileSync(stub, `#!/bin/sh\nprintf '%s' "\${KNOTLESS_THIN_HANDOFF-}" > "$KNOTLESS_TEST_OUT"\n`, {
    mode: 0o755,
  });
  const res = await runProcess(script, ['origin', 'knotless://alice.test/x'], {
    env: { ...env, KNOTLESS_NODE: stub, KNOTLESS_TEST_OUT: out },
    cwd,
  });
  assert.equal(res.code, 0, res.stderr);
  assert.equal(res.stderr, '');
  return fs.readFileSync(out, 'utf8');
}

const long = 'l'.repeat(90);

/**
 * The matrix: each environment, and whether the Perl helper finds the agent itself (`perl`) or hands
 * the session to Node before looking (`node`: a path it does not read cheaply, or one too long for a
 * socket address on Linux).
 */
const CASES: Array<[string, Record<string, string | undefined>, 'perl' | 'node']> = [
  ['HOME alone', {}, 'perl'],
  ['XDG_CACHE_HOME', { XDG_CACHE_HOME: '$H/xdg-cache' }, 'perl'],
  ['XDG_RUNTIME_DIR (which neither reads)', { XDG_RUNTIME_DIR: '$H/run' }, 'perl'],
  ['KNOTLESS_CACHE_DIR', { KNOTLESS_CACHE_DIR: '$H/kc', XDG_CACHE_HOME: '$H/xdg-cache' }, 'perl'],
  ['KNOTLESS_AGENT_SOCKET', { KNOTLESS_AGENT_SOCKET: '$H/sock/a.sock', KNOTLESS_CACHE_DIR: '$H/kc' }, 'perl'],
  ['an empty KNOTLESS_AGENT_SOCKET', { KNOTLESS_AGENT_SOCKET: '' }, 'perl'],
  ['an empty KNOTLESS_CACHE_DIR', { KNOTLESS_CACHE_DIR: '', XDG_CACHE_HOME: '$H/xdg-cache' }, 'perl'],
  [
    'no HOME, both folders set',
    { HOME: undefined, KNOTLESS_CACHE_DIR: '$H/kc', KNOTLESS_CONFIG_DIR: '$H/conf' },
    'perl',
  ],
  ['KNOTLESS_CACHE_DIR with a trailing slash', { KNOTLESS_CACHE_DIR: '$H/kc/' }, 'node'],
  ['KNOTLESS_CACHE_DIR with ..', { KNOTLESS_CACHE_DIR: '$H/x/../kc' }, 'node'],
  ['a relative XDG_CACHE_HOME', { XDG_CACHE_HOME: 'rel-cache' }, 'node'],
  ['a relative KNOTLESS_AGENT_SOCKET', { KNOTLESS_AGENT_SOCKET: 'rel.sock' }, 'node'],
  ['a socket path too long for Linux', { KNOTLESS_CACHE_DIR: `$H/${long}` }, 'node'],
];

describe("the agent's socket path, in Node and in Perl", () => {
  for (const [name, vars, finder] of CASES) {
    it(`${name}: ${finder === 'perl' ? 'both find the agent' : 'Perl leaves it to Node'}`, async () => {
      const { env, home } = setUp(vars);
      const socket = nodeSocket(env, home);
      // Past sun_path's 108 bytes no socket can be made there: Node's rule names it all the same, and
      // Perl must not look anywhere else.
      const fits = Buffer.byteLength(socket) < 108;
      assert.equal(fits, !name.includes('too long'), socket);
      const listener = fits ? await listen(socket) : undefined;
      try {
        if (listener !== undefined) {
          const status = await runProcess(
            process.execPath,
            [path.join(packageRoot(), 'bin', 'knotless.cjs'), 'agent', 'status', '--json'],
            { env, cwd: home },
          );
          assert.equal(status.code, 0, status.stderr);
          assert.equal((JSON.parse(status.stdout) as { running: boolean }).running, true, 'Node found it');
          assert.deepEqual(listener.asked, ['GET /status']);
        }
        const handoff = await perlHandoff(env, home);
        if (finder === 'perl') {
          assert.equal(handoff, 'direct', 'Perl reached the agent where Node did');
          assert.deepEqual(listener?.asked, ['GET /status', 'POST /helper']);
        } else {
          assert.equal(handoff, '', 'Perl left the session to Node without a handoff');
          if (listener !== undefined) assert.deepEqual(listener.asked, ['GET /status']);
        }
      } finally {
        await listener?.close();
      }
    });
  }
});
