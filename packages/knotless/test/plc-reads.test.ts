// A cold listing reads the account's DID document once: the document that names the account's PDS
// also names the key its ref table's proof is checked against (format.md, "Verified"), so the
// resolution hands it to the verified read instead of the read asking the PLC directory again. A
// counting proxy stands in front of the dev network's PLC directory and counts the reads of the
// document (its audit log, read only for an account that moved, is another path).
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test']);
let plc: Proxy | undefined;
let cache: string | undefined;
const alice = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_COMPACT: '0',
  KNOTLESS_AGENT: '0',
  ...(plc === undefined ? {} : { KNOTLESS_PLC_URL: plc.url }),
  ...(cache === undefined ? {} : { KNOTLESS_CACHE_DIR: cache }),
}));
const URL_ = 'knotless://alice.test/site';

before(async () => {
  await t.ready;
  plc = await startProxy({ target: t.net.plcUrl });
});
after(() => plc?.close());

/** Reads of alice's DID document the proxy passed on (answered 2xx: what was read, not attempts). */
function documentReads(): number {
  const doc = `/${encodeURIComponent(t.dids['alice.test']!)}`;
  return plc!.requests.filter(
    (r) => r.method === 'GET' && r.path === doc && r.status >= 200 && r.status < 300,
  ).length;
}

describe('the DID document of a cold listing', () => {
  it('is read once, for the PDS and the signing key both', async () => {
    assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
    const dir = await newRepo(alice, URL_);
    const head = await commitFiles(alice, dir, { 'a.txt': 'one\n' }, 'one');
    await alice.ok(dir, 'push', '-q', 'origin', 'main');

    // Nothing cached: the handle is resolved, its DID's document read, the table's proof verified.
    cache = path.join(alice.dir(), 'cache');
    plc!.reset();
    assert.match(await alice.ok(dir, 'ls-remote', URL_), new RegExp(`^${head}\trefs/heads/main$`, 'm'));
    assert.equal(documentReads(), 1, JSON.stringify(plc!.requests));

    // The handle now cached: its document is read again to check the handle, and that read serves.
    plc!.reset();
    assert.match(await alice.ok(dir, 'ls-remote', URL_), new RegExp(`^${head}\trefs/heads/main$`, 'm'));
    assert.equal(documentReads(), 1, JSON.stringify(plc!.requests));

    // The CLI's listing reads it once too.
    plc!.reset();
    const info = await alice.knotless('repo', 'info', 'alice.test/site');
    assert.equal(info.code, 0, info.stderr);
    assert.equal(documentReads(), 1, JSON.stringify(plc!.requests));
    cache = undefined;
  });
});
