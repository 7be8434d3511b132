import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { agentWireView, spawnAgent, startGate, type Gate, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

// A push through the warm agent into an account its PDS has just deactivated (as `knotless dev
// migrate` does while it copies the account to its new PDS), before the agent's event stream has
// said so: the agent answers git's listing from its view at once, so the first request that meets
// the deactivation is a write. The push fails with the sentence the direct path prints, which
// reads first and meets it there. The stream runs through a relay the test holds, so the moment is
// certain, not timed: the warm user's PLC directory (a relay of the network's) names that relay as
// alice's PDS, and the agent follows the PDS her DID document names.
const t = useNetwork(['alice.test']);
// Its repositories stay on ref records (KNOTLESS_REF_TABLE=0): the requests its cases script, hold
// or count are those of ref records.
t.defaults['KNOTLESS_REF_TABLE'] = '0';
let proxy: Proxy | undefined;
let gate: Gate | undefined;
let plc: http.Server | undefined;
let plcUrl = '';
let socket = '';
let agent: RunningAgent | undefined;
const warm = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_COMPACT: '0',
  KNOTLESS_AGENT_SOCKET: socket,
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url, KNOTLESS_PLC_URL: plcUrl }),
}));
const direct = useGitUser(t, 'alice.test', () => ({ KNOTLESS_AGENT: '0', KNOTLESS_COMPACT: '0' }));

const did = () => t.dids['alice.test']!;
const SENTENCE =
  'knotless: The account alice.test is deactivated; its repositories are unavailable until its owner activates it again.';

/**
 * A relay of the network's PLC directory whose DID documents name the gate where they name the PDS:
 * the agent then follows alice's event stream through the gate, and every resolution of her DID
 * (the one a refused request makes included) agrees with the identity cache.
 */
async function startPlcRelay(): Promise<void> {
  plc = http.createServer((req, res) => {
    fetch(`${t.net.plcUrl}${req.url ?? '/'}`, { method: req.method ?? 'GET' })
      .then(async (up) => {
        const text = (await up.text()).split(t.net.pdsUrl).join(gate!.url);
        res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/json' });
        res.end(text);
      })
      .catch((err: unknown) => res.writeHead(502).end(String(err)));
  });
  await new Promise<void>((resolve) => plc!.listen(0, '127.0.0.1', resolve));
  plcUrl = `http://127.0.0.1:${(plc.address() as AddressInfo).port}`;
}

/** Calls alice's PDS as alice: deactivates or activates her account. */
async function setActive(active: boolean): Promise<void> {
  const login = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.server.createSession`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: did(), password: t.password }),
  });
  assert.equal(login.status, 200, await login.clone().text());
  const { accessJwt } = (await login.json()) as { accessJwt: string };
  const res = await fetch(
    `${t.net.pdsUrl}/xrpc/com.atproto.server.${active ? 'activateAccount' : 'deactivateAccount'}`,
    {
      method: 'POST',
      headers: {
        authorization: `Bearer ${accessJwt}`,
        // deactivateAccount takes an input (its optional deleteAfter); activateAccount none.
        ...(active ? {} : { 'content-type': 'application/json' }),
      },
      ...(active ? {} : { body: '{}' }),
    },
  );
  assert.equal(res.status, 200, await res.text());
}

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl, watchPids: () => (agent ? [agent.child.pid!] : []) });
  gate = await startGate(t.net.pdsUrl);
  await startPlcRelay();
  socket = path.join(t.tmpdir(), 'agent.sock');
});

describe('a push through the agent into an account deactivated before its stream says so', () => {
  // Before the network's own `after`: the PDS waits for open event streams when it closes.
  after(async () => {
    gate?.release();
    await agent?.stop();
    await gate?.close();
    await proxy?.close();
    await new Promise((resolve) => plc?.close(resolve));
  });

  it("fails with the direct path's one sentence, and git is told nothing landed", async () => {
    // What the login cached of alice came from the network's own directory.
    fs.rmSync(path.join(warm.env['KNOTLESS_CACHE_DIR']!, 'identity.json'), { force: true });
    assert.equal((await warm.knotless('repo', 'create', 'site')).code, 0);
    const url = `knotless://${did()}/site`;
    agent = await spawnAgent(socket, {
      ...warm.env,
      KNOTLESS_COMPACT: '0',
      KNOTLESS_SERVICE: proxy!.url,
      KNOTLESS_PLC_URL: plcUrl,
    });
    const dir = await newRepo(warm, url);
    const c1 = await commitFiles(warm, dir, { one: 'one\n' }, 'c1');
    await warm.ok(dir, 'push', '-q', 'origin', 'main');
    const q = { did: did(), repo: 'site', pds: gate!.url };
    // The agent answers for the repository at once, from its view.
    for (;;) {
      const view = await agentWireView(socket, q);
      if (view?.commit !== undefined && view.refs.some((r) => r.record.target === c1)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const od = direct.dir();
    await direct.ok(od, 'clone', '-q', url, '.');

    gate!.hold();
    await setActive(false);
    try {
      assert.notEqual((await agentWireView(socket, q))?.commit, undefined, 'the view answers at once');
      await commitFiles(warm, dir, { two: 'two\n' }, 'c2');
      const from = proxy!.requests.length;
      const res = await warm.git(dir, 'push', '--porcelain', 'origin', 'main');
      const sent = proxy!.requests.slice(from);
      // The agent carried the push: it reached the PDS, on the agent's own connections only.
      assert.ok(sent.length > 0, 'the push sent nothing to the PDS');
      assert.deepEqual(
        sent.filter((r) => r.pid !== agent!.child.pid).map((r) => r.nsid ?? r.path),
        [],
        'requests went around the agent',
      );
      // git's listing came from the agent's view: the push's first request was its ref write.
      assert.match(sent[0]?.nsid ?? '', /^com\.atproto\.repo\.(putRecord|applyWrites)$/, sent[0]?.path);
      // The direct path meets the deactivation at its listing, and says so in one sentence.
      await commitFiles(direct, od, { three: 'three\n' }, 'c3');
      const plain = await direct.git(od, 'push', '--porcelain', 'origin', 'main');
      assert.equal(plain.stderr.trim(), SENTENCE);
      // Through the agent: the same sentence, first, the PDS's own words nowhere, and git told the
      // ref was not pushed.
      assert.equal(res.code, 1, res.stderr);
      assert.equal(
        res.stderr.split('\n').find((l) => l.startsWith('knotless:')),
        SENTENCE,
        res.stderr,
      );
      assert.doesNotMatch(
        res.stderr,
        /AccountDeactivated|Account is deactivated|InvalidRequest|Could not find/,
      );
      assert.match(
        res.stdout,
        /^!\trefs\/heads\/main:refs\/heads\/main\t\[remote rejected\] \(account not active\)$/m,
      );
      assert.equal((await warm.ok(dir, 'rev-parse', 'origin/main')).trim(), c1);
    } finally {
      await setActive(true);
      gate!.release();
    }
    // Nothing landed: the account, active again, still has main at c1.
    const listed = await direct.ok(direct.dir(), 'ls-remote', url, 'refs/heads/main');
    assert.equal(listed.split('\t')[0], c1);
  });
});
