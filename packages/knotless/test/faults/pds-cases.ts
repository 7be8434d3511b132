// PDS faults scripted on the proxy: what is safe to repeat is retried with backoff (Retry-After
// honoured), what is not fails at once, and past the bound git is told which refs failed.
import fs from 'node:fs';
import path from 'node:path';
import type { FaultRule } from 'knotless-devnet';
import { commitFiles, newRepo } from '../helpers/git.ts';
import { freshCloneCheck, lastLine, noise, onTable, type FaultCase } from './checks.ts';
import type { FaultEnv } from './env.ts';

const LIST = 'com.atproto.repo.listRecords';
const TABLE_READ = 'com.atproto.sync.getRecord';
const PUT = 'com.atproto.repo.putRecord';
const BLOB = 'com.atproto.sync.getBlob';
const UPLOAD = 'com.atproto.repo.uploadBlob';

/** A repository with one pushed commit and a second one ready to push. */
async function ready(
  env: FaultEnv,
  big = false,
): Promise<{ url: string; name: string; dir: string; next: string }> {
  const { url, name } = await env.repo('pds');
  const dir = await newRepo(env.alice, url);
  await commitFiles(env.alice, dir, { 'a.txt': 'one\n' }, 'one');
  await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
  const files = big ? { 'big.bin': noise(40_000, 3) } : { 'a.txt': 'two\n' };
  const next = await commitFiles(env.alice, dir, files, 'two');
  return { url, name, dir, next };
}

/** Pushes `next` under `rule`; reports the push, how often the fault fired, and the remote's state. */
function pushUnder(name: string, rule: FaultRule, opts: { big?: boolean; minMs?: number } = {}): FaultCase {
  const fired = rule.times === undefined ? 1 : rule.times;
  return {
    group: 'pds',
    name,
    expected: `push ok; fault fired ${fired}x; remote at the new commit; fsck clean`,
    async run(env) {
      const { url, dir, next } = await ready(env, opts.big);
      env.proxy.inject(rule);
      const started = Date.now();
      const res = await env.alice.git(dir, 'push', '-q', 'origin', 'main');
      const ms = Date.now() - started;
      const facts = [res.code === 0 ? 'push ok' : `push failed: ${lastLine(res.stderr)}`];
      facts.push(`fault fired ${env.proxy.faultsFired.length}x`);
      if (opts.minMs !== undefined && ms < opts.minMs) facts.push(`did not wait (${ms} ms)`);
      env.proxy.clearFaults();
      const check = await freshCloneCheck(env, url);
      const tip = (await env.alice.git(check.dir, 'rev-parse', 'refs/heads/main')).stdout.trim();
      facts.push(tip === next ? 'remote at the new commit' : `remote at ${tip}`);
      facts.push(check.verdict);
      return facts.join('; ');
    },
  };
}

/** Clones a repository whose pack is in blobs, with a fresh cache, under `rule`. */
function cloneUnder(name: string, rule: FaultRule): FaultCase {
  return {
    group: 'pds',
    name,
    expected: `clone ok; fault fired ${rule.times ?? 1}x; fsck clean`,
    async run(env) {
      const { url, dir } = await ready(env, true);
      await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
      env.proxy.inject(rule);
      const out = env.alice.dir();
      const res = await env.withEnv({ KNOTLESS_CACHE_DIR: path.join(out, 'cache') }, () =>
        env.alice.git(out, 'clone', '-q', url, 'c'),
      );
      const facts = [res.code === 0 ? 'clone ok' : `clone failed: ${lastLine(res.stderr)}`];
      facts.push(`fault fired ${env.proxy.faultsFired.length}x`);
      const fsck = await env.alice.git(path.join(out, 'c'), 'fsck', '--full');
      facts.push(fsck.code === 0 ? 'fsck clean' : `fsck: ${lastLine(fsck.stderr)}`);
      return facts.join('; ');
    },
  };
}

/**
 * A push that must fail past the bound: one clear sentence, and every ref reported failed to git
 * (none when the refs could not be read: git is told nothing to push).
 */
function pushFailing(name: string, rule: FaultRule, sentence: RegExp, maxMs: number, refused = 2): FaultCase {
  return {
    group: 'pds',
    name,
    expected: `push failed; one clear sentence; git told ${refused} refs failed; remote unchanged`,
    async run(env) {
      const { url, dir } = await ready(env);
      const before = (await env.alice.ok(dir, 'ls-remote', url, 'refs/heads/main')).split('\t')[0];
      env.proxy.inject(rule);
      const started = Date.now();
      const res = await env.alice.git(dir, 'push', 'origin', 'main', 'main:refs/heads/side');
      const ms = Date.now() - started;
      env.proxy.clearFaults();
      const facts = [res.code !== 0 ? 'push failed' : 'push ok'];
      const ours = res.stderr.split('\n').filter((l) => l.startsWith('knotless: '));
      facts.push(
        ours.length === 1 && sentence.test(ours[0]!) && ms < maxMs
          ? 'one clear sentence'
          : `said ${JSON.stringify(ours)} in ${ms} ms`,
      );
      facts.push(`git told ${(res.stderr.match(/\[remote rejected\]/g) ?? []).length} refs failed`);
      const after = (await env.alice.ok(dir, 'ls-remote', url, 'refs/heads/main')).split('\t')[0];
      facts.push(after === before ? 'remote unchanged' : 'remote changed');
      return facts.join('; ');
    },
  };
}

/**
 * The requests a layout's cases fault: the read of a repository's refs (the listing of its ref
 * records, or its table with its proof), and the write that deletes a ref (a ref record's
 * deleteRecord, or one putRecord of the table) and the one that deletes a repository without
 * compare-and-swap (its repo record's deleteRecord after its ref records, or the applyWrites that
 * deletes its table first).
 */
interface Layout {
  read: string;
  /** What a push says when the read of its refs fails past the retry bound. */
  readFailed: RegExp;
  refDelete: string;
  repoDelete: string;
}

/** The PDS-fault cases of one layout. */
function pdsCases({ read: READ, readFailed, refDelete, repoDelete }: Layout): FaultCase[] {
  const short = READ.split('.').pop()!;
  return [
    pushUnder(`${short} answers 503 twice`, {
      nsid: READ,
      times: 2,
      fault: { kind: 'status', status: 503 },
    }),
    pushUnder(`${short} connection dropped`, { nsid: READ, fault: { kind: 'drop' } }),
    pushUnder(`${short} answer cut mid-body`, { nsid: READ, fault: { kind: 'cut', bytes: 40 } }),
    pushUnder(`${short} delayed 400 ms`, { nsid: READ, fault: { kind: 'delay', ms: 400 } }, { minMs: 400 }),
    pushUnder(
      `${short} 429 with Retry-After: 1`,
      { nsid: READ, fault: { kind: 'rate-limit', retryAfter: 1 } },
      { minMs: 1000 },
    ),
    pushUnder('putRecord answers 503 (compare-and-swap: retried)', {
      nsid: PUT,
      fault: { kind: 'status', status: 503 },
    }),
    pushUnder('putRecord lands but its answer is cut', { nsid: PUT, fault: { kind: 'cut', bytes: 10 } }),
    pushUnder(
      'uploadBlob answers 500',
      { nsid: UPLOAD, fault: { kind: 'status', status: 500 } },
      { big: true },
    ),
    cloneUnder('getBlob connection dropped twice', { nsid: BLOB, times: 2, fault: { kind: 'drop' } }),
    cloneUnder('getBlob answer cut mid-body', { nsid: BLOB, fault: { kind: 'cut', bytes: 1000 } }),
    pushFailing(
      `${short} answers 503 past the retry bound`,
      { nsid: READ, times: Infinity, fault: { kind: 'status', status: 503 } },
      readFailed,
      60_000,
      0,
    ),
    pushFailing(
      'putRecord answers 503 past the retry bound',
      { nsid: PUT, times: Infinity, fault: { kind: 'status', status: 503 } },
      /^knotless: The PDS failed writing the refs of alice\.test\/pds-\d+ 5 times \(HTTP 503 \w+\); it may be down, try again later\.$/,
      60_000,
    ),
    pushFailing(
      'putRecord 429 with Retry-After beyond the wait budget',
      { nsid: PUT, times: Infinity, fault: { kind: 'rate-limit', retryAfter: 3600 } },
      /^knotless: The PDS is rate-limiting writing the refs of alice\.test\/pds-\d+ until \S+; try again then, in \d+ s\.$/,
      // Not the hour Retry-After asks for: a guard a loaded machine cannot reach.
      60_000,
    ),
    {
      group: 'pds',
      name: 'answers lost after the write landed: repo create, repo commit, a ref delete',
      expected: 'create ok; commit ok, one commit; delete ok, ref gone',
      async run(env) {
        const cut = (nsid: string) => env.proxy.inject({ nsid, fault: { kind: 'cut', bytes: 5 } });
        const facts: string[] = [];
        cut(PUT);
        const name = `pds-lost-${Date.now()}`;
        const created = await env.alice.knotless('repo', 'create', name);
        facts.push(created.code === 0 ? 'create ok' : `create failed: ${lastLine(created.stderr)}`);
        const url = `knotless://alice.test/${name}`;
        const dir = await newRepo(env.alice, url);
        const first = await commitFiles(env.alice, dir, { 'a.txt': 'one\n' }, 'one');
        await env.alice.ok(dir, 'push', '-q', 'origin', 'main', 'main:refs/heads/side');
        const file = path.join(env.alice.dir(), 'f.txt');
        fs.writeFileSync(file, 'bot\n');
        cut(PUT);
        const made = await env.alice.knotless('repo', 'commit', name, '-m', 'bot', '--add', `f.txt=${file}`);
        const check = await freshCloneCheck(env, url);
        const parent = (await env.alice.git(check.dir, 'rev-parse', 'refs/heads/main^')).stdout.trim();
        facts.push(
          made.code === 0 && parent === first
            ? 'commit ok, one commit'
            : `commit: ${made.code}, parent ${parent}`,
        );
        cut(refDelete);
        const del = await env.alice.git(dir, 'push', '-q', 'origin', ':side');
        const gone = !(await env.alice.ok(dir, 'ls-remote', url)).includes('refs/heads/side');
        facts.push(
          del.code === 0 && gone ? 'delete ok, ref gone' : `delete: ${lastLine(del.stderr)}, gone ${gone}`,
        );
        return facts.join('; ');
      },
    },
    {
      group: 'pds',
      name: 'retries are silent, unless git asks for verbosity (push -v)',
      expected: 'quiet push ok, said nothing; push -v ok, said it retried',
      async run(env) {
        const { dir } = await ready(env);
        const fault = () => env.proxy.inject({ nsid: READ, fault: { kind: 'status', status: 502 } });
        fault();
        const quiet = await env.alice.git(dir, 'push', 'origin', 'main');
        const said = quiet.stderr.split('\n').filter((l) => l.startsWith('knotless: '));
        await commitFiles(env.alice, dir, { 'a.txt': 'three\n' }, 'three');
        fault();
        const loud = await env.alice.git(dir, 'push', '-v', 'origin', 'main');
        const retried = new RegExp(
          `^knotless: retrying ${READ.replace(/\./g, '\\.')} in \\d+ ms \\(HTTP 502; attempt 2 of 5\\)$`,
          'm',
        );
        return [
          quiet.code === 0 && said.length === 0
            ? 'quiet push ok, said nothing'
            : `quiet push: ${JSON.stringify(said)}`,
          loud.code === 0 && retried.test(loud.stderr)
            ? 'push -v ok, said it retried'
            : `push -v: ${lastLine(loud.stderr)}`,
        ].join('; ');
      },
    },
    {
      group: 'pds',
      name: 'every request dropped (the PDS is down)',
      expected: 'clone failed; one clear sentence; tried 5 times; no hang; nothing written',
      async run(env) {
        const { url } = await env.repo('pds-down');
        env.proxy.inject({ times: Infinity, fault: { kind: 'drop' } });
        env.proxy.reset();
        const out = env.alice.dir();
        const started = Date.now();
        const res = await env.alice.git(out, 'clone', '-q', url, 'c');
        const ms = Date.now() - started;
        const ours = res.stderr.split('\n').filter((l) => l.startsWith('knotless: '));
        const tried = env.proxy.count(READ);
        return [
          res.code !== 0 ? 'clone failed' : 'clone ok',
          ours.length === 1 && /^knotless: Could not reach \S+ \(\w+\) after 5 attempts; .+\.$/.test(ours[0]!)
            ? 'one clear sentence'
            : `said ${JSON.stringify(ours)}`,
          `tried ${tried} times`,
          // A guard against a hang, not a speed claim (the retries' backoff is 20 ms here).
          ms < 60_000 ? 'no hang' : `took ${ms} ms`,
          fs.readdirSync(out).length === 0 ? 'nothing written' : 'left files',
        ].join('; ');
      },
    },
    {
      group: 'pds',
      name: 'every getBlob answer cut mid-body',
      expected: 'clone failed; one clear sentence; nothing written',
      async run(env) {
        const { url, dir } = await ready(env, true);
        await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
        env.proxy.inject({ nsid: BLOB, times: Infinity, fault: { kind: 'cut', bytes: 100 } });
        const out = env.alice.dir();
        const res = await env.withEnv({ KNOTLESS_CACHE_DIR: path.join(out, 'cache') }, () =>
          env.alice.git(out, 'clone', '-q', url, 'c'),
        );
        const ours = res.stderr.split('\n').filter((l) => l.startsWith('knotless: '));
        // The transport reports a cut as a reset connection, or the client sees a short body: either way, one sentence.
        const sentence =
          /^knotless: (Could not reach \S+ \(ECONNRESET\)|\S+ sent answers cut short or unreadable \(ETRUNCATED\)) after 5 attempts; .+\.$/;
        return [
          res.code !== 0 ? 'clone failed' : 'clone ok',
          ours.length === 1 && sentence.test(ours[0]!)
            ? 'one clear sentence'
            : `said ${JSON.stringify(ours)}`,
          fs.readdirSync(out).filter((e) => e !== 'cache').length === 0 ? 'nothing written' : 'left files',
        ].join('; ');
      },
    },
    {
      group: 'pds',
      name: 'a write without compare-and-swap is not repeated',
      expected: `delete failed (exit 9); ${repoDelete.split('.').pop()!} sent once; repository still there`,
      async run(env) {
        const { name } = await env.repo('pds-delete');
        env.proxy.inject({ nsid: repoDelete, fault: { kind: 'status', status: 503 } });
        env.proxy.reset();
        const res = await env.alice.knotless('repo', 'delete', name, '--yes');
        const sent = env.proxy.count(repoDelete);
        env.proxy.clearFaults();
        const still = (await env.alice.knotless('repo', 'info', name)).code === 0;
        return `delete failed (exit ${res.code}); ${repoDelete.split('.').pop()!} sent ${sent === 1 ? 'once' : `${sent} times`}; repository ${still ? 'still there' : 'gone'}`;
      },
    },
  ];
}

/** Every PDS-fault case. */
export const PDS_CASES: FaultCase[] = pdsCases({
  read: LIST,
  readFailed:
    /^knotless: The PDS failed listing the refs of alice\.test\/pds-\d+ 5 times \(HTTP 503 \w+\); it may be down, try again later\.$/,
  refDelete: 'com.atproto.repo.deleteRecord',
  repoDelete: 'com.atproto.repo.deleteRecord',
});

/** The same on a ref table (the default layout), whose read is its verified getRecord. */
export const TABLE_PDS_CASES: FaultCase[] = pdsCases({
  read: TABLE_READ,
  readFailed:
    /^knotless: The PDS failed reading the ref table of alice\.test\/pds-\d+ 5 times \(HTTP 503 \w+\); it may be down, try again later\.$/,
  refDelete: PUT,
  repoDelete: 'com.atproto.repo.applyWrites',
}).map((c) => onTable(c));
