// A PDS that answers com.atproto.sync.getRecord of an absent record with RecordNotFound (400) instead
// of a proof of its absence (format.md, "Verified"): the error alone proves nothing, so the reader
// reads the account's whole signed repository once (com.atproto.sync.getRepo, up to 64 MiB) and looks
// the key up in its tree. The stand-in is the dev network's proxy in front of the real PDS, answering
// every getRecord so; the commands run cold, directly and through the agent.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { isKnotlessError } from 'knotless-core/errors';
import { accountSigningKey, verifiedRead, WHOLE_REPOSITORY_BYTES } from 'knotless-core/records/verified-read';
import { transportFor } from 'knotless-core/xrpc/transport';
import { spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test', 'bob.test']);
const transport = transportFor({ caCerts: undefined });
let proxy: Proxy | undefined;
let socket = '';
let agent: RunningAgent | undefined;
const alice = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_COMPACT: '0',
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
  ...(agent === undefined ? { KNOTLESS_AGENT: '0' } : { KNOTLESS_AGENT_SOCKET: socket }),
}));

const NOT_FOUND = {
  nsid: 'com.atproto.sync.getRecord',
  times: Infinity,
  fault: { kind: 'status', status: 400, error: 'RecordNotFound', message: 'Could not locate record' },
} as const;

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl, watchPids: () => (agent ? [agent.child.pid!] : []) });
});
after(async () => {
  await agent?.stop();
  transport.close();
  await proxy?.close();
});

async function getRepo(did: string): Promise<Uint8Array> {
  const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.sync.getRepo?did=${did}`);
  assert.equal(res.status, 200);
  return new Uint8Array(await res.arrayBuffer());
}

async function read(rkey: string) {
  const did = t.dids['alice.test']!;
  return verifiedRead({
    transport,
    pds: proxy!.url,
    did,
    collection: 'dev.knotless.refs',
    rkey,
    signingKey: await accountSigningKey(transport, did, t.net.plcUrl, 'alice.test/project'),
    name: 'alice.test/project',
  });
}

async function refused(p: Promise<unknown>, words: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isKnotlessError(err, 'unverified-remote'), String(err));
    assert.equal(
      err.message,
      `The ref table of alice.test/project could not be verified (${words}); nothing from it was used, so check the PDS or the network in between and try again.`,
    );
    return true;
  });
}

describe('a PDS without proofs of absence', () => {
  it('proves an absence from the whole signed repository, and refuses it when that does not hold', async () => {
    assert.equal((await alice.knotless('repo', 'create', 'project')).code, 0);
    proxy!.inject(NOT_FOUND);
    try {
      proxy!.reset();
      const got = await read('nothing-here');
      assert.equal(got.found, false);
      assert.match(got.rev, /^[a-z2-7]{13}$/);
      // One error, then one read of the repository.
      assert.equal(proxy!.count('com.atproto.sync.getRecord'), 1);
      assert.equal(proxy!.count('com.atproto.sync.getRepo'), 1);

      // Another account's repository, served for alice's: signed, but not hers.
      proxy!.inject({
        nsid: 'com.atproto.sync.getRepo',
        fault: {
          kind: 'replace',
          body: await getRepo(t.dids['bob.test']!),
          contentType: 'application/vnd.ipld.car',
        },
      });
      await refused(read('nothing-here'), "the proof is another account's commit");

      // A repository past the bound is not read at all.
      proxy!.inject({
        nsid: 'com.atproto.sync.getRepo',
        fault: {
          kind: 'replace',
          body: new Uint8Array(WHOLE_REPOSITORY_BYTES + 1),
          contentType: 'application/vnd.ipld.car',
        },
      });
      await refused(
        read('nothing-here'),
        "the PDS gave no proof that it is absent, and the account's repository is larger than the 64 MiB knotless reads to check it whole",
      );

      // getRepo refused too: nothing is proved.
      proxy!.inject({ nsid: 'com.atproto.sync.getRepo', fault: { kind: 'status', status: 500 } });
      await refused(
        read('nothing-here'),
        "the PDS gave no proof that it is absent, and answered HTTP 500 instead of the account's repository",
      );
    } finally {
      proxy!.clearFaults();
    }
  });

  for (const via of ['directly', 'through the agent']) {
    it(`lists, clones and shows a repository on ref records ${via}`, async () => {
      const name = via === 'directly' ? 'plain' : 'warm';
      const url = `knotless://alice.test/${name}`;
      assert.equal((await alice.knotless('repo', 'create', name)).code, 0);
      const dir = await newRepo(alice, url);
      const head = await commitFiles(alice, dir, { 'a.txt': 'one\n' }, 'one');
      await alice.ok(dir, 'push', '-q', 'origin', 'main');
      if (via === 'through the agent') {
        socket = path.join(t.tmpdir(), 'agent.sock');
        agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_AGENT_SOCKET: socket });
      }
      proxy!.inject(NOT_FOUND);
      try {
        proxy!.reset();
        const ls = await alice.git(dir, 'ls-remote', url);
        assert.equal(ls.code, 0, ls.stderr);
        assert.equal(ls.stderr, '');
        assert.match(ls.stdout, new RegExp(`^${head}\trefs/heads/main$`, 'm'));
        const clone = path.join(alice.dir(), `clone-${name}`);
        await alice.ok(alice.dir(), 'clone', '-q', url, clone);
        assert.equal((await alice.ok(clone, 'rev-parse', 'HEAD')).trim(), head);
        const repos = proxy!.requests.filter((r) => r.nsid === 'com.atproto.sync.getRepo');
        assert.ok(repos.length > 0, 'the table was not proved absent from the repository');
        assert.ok(repos.every((r) => r.status === 200));
        if (agent === undefined) assert.ok(repos.every((r) => r.pid === undefined));
        else
          assert.ok(
            repos.every((r) => r.pid === agent!.child.pid),
            'the agent did not read the repository',
          );
        const info = await alice.knotless('repo', 'info', `alice.test/${name}`);
        assert.equal(info.code, 0, info.stderr);
        assert.match(info.stdout, /refs\s+1$/m);
      } finally {
        proxy!.clearFaults();
        await agent?.stop();
        agent = undefined;
      }
    });
  }
});
