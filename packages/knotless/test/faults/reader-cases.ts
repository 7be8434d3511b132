// Lost answers of batch creates: a push of new refs writes them in one applyWrites; when
// that lands but its answer is lost, the push reads the refs back and reports what landed as ok,
// instead of falling to the one-by-one writer whose compare-and-swap would call them "stale info".
import { commitFiles, newRepo } from '../helpers/git.ts';
import { freshCloneCheck, lastLine, onTable, remoteRefs, type FaultCase } from './checks.ts';

const APPLY = 'com.atproto.repo.applyWrites';
const PUT = 'com.atproto.repo.putRecord';

/**
 * Pushes new refs with `flags` while the answer of their write (`write`: the batch create of ref
 * records, or the one putRecord of a ref table) is cut after it was forwarded.
 */
function lostBatchAnswer(name: string, flags: string[], write = APPLY): FaultCase {
  return {
    group: 'pds',
    name,
    expected:
      'push ok; fault fired 1x; git told 0 refs failed; remote has exactly what was pushed; fsck clean',
    async run(env) {
      const { url } = await env.repo('reader-batch');
      const dir = await newRepo(env.alice, url);
      const one = await commitFiles(env.alice, dir, { 'a.txt': 'one\n' }, 'one');
      await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
      const two = await commitFiles(env.alice, dir, { 'b.txt': 'two\n' }, 'two');
      await env.alice.ok(dir, 'branch', 'topic', one);
      await env.alice.ok(dir, 'branch', 'other', two);
      await env.alice.ok(dir, 'tag', 'v1', one);
      // The one-by-one writer never runs here unless the batch is given up on: main moves by itself.
      env.proxy.inject({ nsid: write, fault: { kind: 'cut', bytes: 10 } });
      // A mirror push from a bare copy: `--mirror` would also push the work tree's remote-tracking refs.
      let from = dir;
      if (flags.includes('--mirror')) {
        from = `${env.alice.dir()}/src.git`;
        await env.alice.ok(dir, 'clone', '-q', '--mirror', dir, from);
        await env.alice.ok(from, 'update-ref', '-d', 'refs/remotes/origin/main');
      }
      const refspecs = flags.includes('--mirror') ? [url] : ['origin', 'main', 'topic', 'other', 'v1'];
      const res = await env.alice.git(from, 'push', ...flags, ...refspecs);
      const facts = [res.code === 0 ? 'push ok' : `push failed: ${lastLine(res.stderr)}`];
      facts.push(`fault fired ${env.proxy.faultsFired.length}x`);
      const failed = (res.stderr.match(/\[remote rejected\]|\[rejected\]|stale info/g) ?? []).length;
      facts.push(`git told ${failed} refs failed`);
      env.proxy.clearFaults();
      const refs = await remoteRefs(env, url);
      const want = new Map([
        ['refs/heads/main', two],
        ['refs/heads/topic', one],
        ['refs/heads/other', two],
        ['refs/tags/v1', one],
      ]);
      const same = refs.size === want.size && [...want].every(([r, oid]) => refs.get(r) === oid);
      facts.push(same ? 'remote has exactly what was pushed' : `remote has ${JSON.stringify([...refs])}`);
      facts.push((await freshCloneCheck(env, url)).verdict);
      return facts.join('; ');
    },
  };
}

/** The reader/batch cases of one layout, whose push of new refs is `write`. */
const lostAnswers = (what: string, write: string): FaultCase[] => [
  lostBatchAnswer(
    `a forced push of new refs whose ${what} answer is lost reports what landed`,
    ['--force'],
    write,
  ),
  lostBatchAnswer(`a push of new refs whose ${what} answer is lost reports what landed`, [], write),
  lostBatchAnswer(`a --mirror push whose ${what} answer is lost reports what landed`, ['--mirror'], write),
];

/** Every reader/batch case. */
export const READER_CASES: FaultCase[] = lostAnswers('batch', APPLY);

/** The same on a ref table (the default layout), whose new refs are one write of the table. */
export const TABLE_READER_CASES: FaultCase[] = lostAnswers("table write's", PUT).map((c) => onTable(c));
