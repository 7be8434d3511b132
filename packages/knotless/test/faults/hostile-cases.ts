// Hostile or broken data from a PDS: each refused with one clear message, nothing written outside
// the repository, no crash, no hang; unknown fields tolerated.
import fs from 'node:fs';
import path from 'node:path';
import { MAX_RECORD_BYTES } from 'knotless-core/records/ref-record';
import { lastLine, noise, type FaultCase } from './checks.ts';
import {
  bytesOf,
  forgedRepo,
  oneBlobPack,
  pushedRepo,
  putRef,
  refusedClone,
  sealPack,
} from './hostile-data.ts';

const REFUSED = 'refused; clear message; nothing written; no hang';

/** A clone of a repository whose pack is in blobs, with a fresh cache so the blobs are downloaded. */
async function blobRepo(env: Parameters<FaultCase['run']>[0]): Promise<string> {
  const { url } = await env.repo('hostile-blob');
  const dir = env.alice.dir();
  await env.alice.ok(dir, 'init', '-q');
  await env.alice.ok(dir, 'remote', 'add', 'origin', url);
  fs.writeFileSync(path.join(dir, 'big.bin'), noise(40_000, 11));
  await env.alice.ok(dir, 'add', '-A');
  await env.alice.ok(dir, 'commit', '-q', '-m', 'big');
  await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
  return url;
}

const fresh = (env: Parameters<FaultCase['run']>[0]) => ({
  KNOTLESS_CACHE_DIR: path.join(env.alice.dir(), 'cache'),
});

/** Every hostile-data case. */
export const HOSTILE_CASES: FaultCase[] = [
  {
    group: 'hostile',
    name: 'a blob the PDS does not have',
    expected: REFUSED,
    async run(env) {
      const url = await blobRepo(env);
      env.proxy.inject({
        nsid: 'com.atproto.sync.getBlob',
        times: Infinity,
        fault: { kind: 'status', status: 400, error: 'BlobNotFound' },
      });
      return refusedClone(env, url, /is missing from the PDS/, fresh(env));
    },
  },
  {
    group: 'hostile',
    name: 'blob bytes that do not match their CID',
    expected: REFUSED,
    async run(env) {
      const url = await blobRepo(env);
      env.proxy.inject({
        nsid: 'com.atproto.sync.getBlob',
        times: Infinity,
        fault: { kind: 'replace', body: noise(40_000, 99) },
      });
      return refusedClone(env, url, /does not match its CID/, fresh(env));
    },
  },
  {
    group: 'hostile',
    name: 'a truncated pack (checksum recomputed to match)',
    expected: REFUSED,
    async run(env) {
      const { tip, packs } = await pushedRepo(env, 'hostile-src');
      const whole = bytesOf(packs[0]!);
      const cut = sealPack(whole.subarray(0, Math.floor((whole.length - 20) / 2)));
      const forged = { ...packs[0]!, id: cut.subarray(cut.length - 20).toString('hex'), size: cut.length };
      forged.inline = { $bytes: cut.toString('base64') };
      const { url } = await forgedRepo(env, 'hostile-trunc', tip, [forged]);
      return refusedClone(env, url, /was refused: (it is truncated|object \d+ is damaged)/);
    },
  },
  {
    group: 'hostile',
    name: 'a thin pack whose delta bases are in no earlier pack',
    expected: REFUSED,
    async run(env) {
      const { tip, packs } = await pushedRepo(env, 'hostile-src');
      // The second push's last pack: its blobs, story.txt as a delta against the first push's.
      const { url } = await forgedRepo(env, 'hostile-thin', tip, [packs.at(-1)!]);
      return refusedClone(env, url, /lack their delta bases/);
    },
  },
  {
    group: 'hostile',
    name: 'a decompression bomb (64 MiB of zeros in 64 KiB)',
    expected: REFUSED,
    async run(env) {
      const { pack, oid } = oneBlobPack(Buffer.alloc(64 * 1024 * 1024));
      const { url } = await forgedRepo(env, 'hostile-bomb', oid, [
        {
          id: pack.subarray(pack.length - 20).toString('hex'),
          size: pack.length,
          count: 1,
          inline: { $bytes: pack.toString('base64') },
        },
      ]);
      return refusedClone(env, url, /decompression bomb/);
    },
  },
  {
    group: 'hostile',
    name: 'an object declaring 1 TiB',
    expected: REFUSED,
    async run(env) {
      const { pack, oid } = oneBlobPack(Buffer.from('tiny'), 2 ** 40);
      const { url } = await forgedRepo(env, 'hostile-huge', oid, [
        {
          id: pack.subarray(pack.length - 20).toString('hex'),
          size: pack.length,
          count: 1,
          inline: { $bytes: pack.toString('base64') },
        },
      ]);
      return refusedClone(env, url, /more than the limit of \d+/);
    },
  },
  {
    group: 'hostile',
    name: `a ref record over ${MAX_RECORD_BYTES} bytes`,
    // A listing is proved whole against the account's signed commit before any record of it is
    // read: one the PDS made up (this record was never written) is refused whole, in one sentence.
    expected: 'forged listing refused in one sentence; clone failed; no hang',
    async run(env) {
      const { name, url, packs, tip } = await pushedRepo(env, 'hostile-big');
      const listing = {
        records: [
          {
            uri: `at://${env.did}/dev.knotless.ref/${name}~refs_heads_main`,
            cid: 'bafyreih7bzycdb6w2gjl7ul2k2wzyq4bbxsqlrdyvpqmekxm3xlnzqzjgm',
            value: {
              repo: name,
              ref: 'refs/heads/main',
              target: tip,
              packs,
              padding: 'x'.repeat(MAX_RECORD_BYTES),
            },
          },
        ],
      };
      env.proxy.inject({
        nsid: 'com.atproto.repo.listRecords',
        times: Infinity,
        fault: {
          kind: 'replace',
          body: Buffer.from(JSON.stringify(listing)),
          contentType: 'application/json',
        },
      });
      const out = env.alice.dir();
      const started = Date.now();
      const res = await env.alice.git(out, 'clone', '-q', url, 'c');
      const refused =
        /^knotless: The ref table of alice\.test\/\S+ could not be verified \(a ref record listed is not the one the account's signed commit holds\)/m.test(
          res.stderr,
        ) && res.stderr.split('\n').filter((l) => l.startsWith('knotless:')).length === 1;
      return `${refused ? 'forged listing refused in one sentence' : `said: ${lastLine(res.stderr)}`}; ${res.code === 0 ? 'clone of the rest ok' : 'clone failed'}; ${Date.now() - started < 60_000 ? 'no hang' : 'slow'}`;
    },
  },
  {
    group: 'hostile',
    name: 'a listing that repeats itself forever, and one that is not a listing',
    expected: `${REFUSED}; ${REFUSED}`,
    async run(env) {
      const { name, url, tip } = await pushedRepo(env, 'hostile-list');
      const records = Array.from({ length: 100 }, (_, i) => ({
        uri: `at://${env.did}/dev.knotless.ref/${name}~refs_heads_b${i}`,
        cid: 'bafyreih7bzycdb6w2gjl7ul2k2wzyq4bbxsqlrdyvpqmekxm3xlnzqzjgm',
        value: { repo: name, ref: `refs/heads/b${i}`, target: tip, packs: [] },
      }));
      const answer = (body: unknown) =>
        env.proxy.inject({
          nsid: 'com.atproto.repo.listRecords',
          times: Infinity,
          fault: {
            kind: 'replace',
            body: Buffer.from(JSON.stringify(body)),
            contentType: 'application/json',
          },
        });
      answer({ records, cursor: 'again' });
      const forever = await refusedClone(env, url, /listing of dev\.knotless\.ref repeats itself/);
      env.proxy.clearFaults();
      answer({ records: 'nope', cursor: 3 });
      const notOne = await refusedClone(env, url, /with something that is not one/);
      return `${forever}; ${notOne}`;
    },
  },
  {
    group: 'hostile',
    name: 'unknown fields in records and packs',
    expected: 'clone ok; fsck clean; at the pushed commit',
    async run(env) {
      const { name, url, packs, tip } = await pushedRepo(env, 'hostile-future');
      const future = packs.map((p) => ({ ...p, compression: 'zstd-someday', extra: { nested: [1, 2, 3] } }));
      await putRef(env, name, 'refs/heads/main', {
        target: tip,
        packs: future,
        signedBy: 'did:example:x',
        v: 2,
      });
      const out = env.alice.dir();
      const res = await env.alice.git(out, 'clone', '-q', url, 'c');
      const fsck = await env.alice.git(path.join(out, 'c'), 'fsck', '--full');
      const head = (await env.alice.git(path.join(out, 'c'), 'rev-parse', 'HEAD')).stdout.trim();
      return `${res.code === 0 ? 'clone ok' : `clone failed: ${lastLine(res.stderr)}`}; ${fsck.code === 0 ? 'fsck clean' : 'fsck failed'}; ${head === tip ? 'at the pushed commit' : `at ${head}`}`;
    },
  },
  {
    group: 'hostile',
    name: 'ref names escaping refs/, a bad HEAD, a record of another repository',
    expected:
      'clone ok; 7 records refused with a warning; only refs/heads/main; nothing outside the repository',
    async run(env) {
      const { name, url, packs, tip } = await pushedRepo(env, 'hostile-names');
      for (const ref of [
        'refs/../x',
        'HEAD/..',
        '../../evil',
        'refs/heads/../../../evil',
        'refs/heads/a\\..\\b',
      ])
        await putRef(env, name, ref, { target: tip, packs });
      await putRef(env, name, 'HEAD', { symref: '../../../evil', packs: [] });
      await putRef(env, name, 'refs/heads/other', { repo: '../elsewhere', target: tip, packs });
      const out = env.alice.dir();
      const res = await env.alice.git(out, 'clone', '-q', url, 'c');
      const warnings = res.stderr
        .split('\n')
        .filter((l) => /knotless: warning: .*it was ignored/.test(l)).length;
      const refs = (
        await env.alice.git(
          path.join(out, 'c'),
          'for-each-ref',
          '--format=%(refname)',
          'refs/heads',
          'refs/remotes',
        )
      ).stdout
        .split('\n')
        .filter((r) => r !== '' && r !== 'refs/remotes/origin/HEAD');
      const only = refs.every((r) => r.endsWith('/main'));
      const outside = fs.readdirSync(out).filter((e) => e !== 'c');
      const stray = ['x', 'evil'].filter((f) => fs.existsSync(path.join(out, 'c', '.git', f)));
      return `${res.code === 0 ? 'clone ok' : `clone failed: ${lastLine(res.stderr)}`}; ${warnings} records refused with a warning; ${only ? 'only refs/heads/main' : `refs: ${refs.join(' ')}`}; ${outside.length + stray.length === 0 ? 'nothing outside the repository' : `wrote ${[...outside, ...stray].join(', ')}`}`;
    },
  },
  {
    group: 'hostile',
    name: 'repository names with ..',
    expected: '4 refused with one sentence; nothing written',
    async run(env) {
      const out = env.alice.dir();
      let refused = 0;
      for (const url of [
        'knotless://alice.test/..',
        'knotless://alice.test/%2E%2E',
        'knotless://alice.test/a%2F..',
      ]) {
        const res = await env.alice.git(out, 'clone', '-q', url, 'c');
        if (res.code !== 0 && /knotless: ".*" is not a (valid repository name|knotless URL)/.test(res.stderr))
          refused++;
      }
      const create = await env.alice.knotless('repo', 'create', '..');
      if (create.code === 2 && /not a valid repository name/.test(create.stderr)) refused++;
      const left = fs.readdirSync(out);
      return `${refused} refused with one sentence; ${left.length === 0 ? 'nothing written' : `left ${left.join(', ')}`}`;
    },
  },
];
