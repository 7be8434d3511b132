// A ref inside another (refs/heads/main/inner beside refs/heads/main): knotless refuses to push such
// a pair, as a bare repository does, but another tool may write the records. No git repository can
// hold both, so a clone is shown the outer ref with one warning, and a push can still delete either.
import path from 'node:path';
import type { FaultCase } from './checks.ts';
import { okOrSaid } from './escape-data.ts';
import { pushedRepo, putRef } from './hostile-data.ts';

export const NESTED_CASES: FaultCase[] = [
  {
    group: 'hostile',
    name: 'records: a ref inside another (refs/heads/main and refs/heads/main/inner)',
    expected:
      'clone ok without the inner ref, one warning; a new ref inside main refused; the inner ref deleted; listed again without warning',
    async run(env) {
      const { name, url, tip, packs } = await pushedRepo(env, 'nested');
      await putRef(env, name, 'refs/heads/main/inner', { target: tip, packs });
      const dir = env.alice.dir();
      const clone = await env.alice.git(dir, 'clone', url, 'c');
      const work = path.join(dir, 'c');
      // Without the fix git stops at "cannot lock ref" and removes the half-made clone.
      if (clone.code !== 0) return `clone: ${okOrSaid(clone)}`;
      const warnings = clone.stderr.split('\n').filter((l) => / is left out: /.test(l));
      const inner =
        clone.code === 0
          ? (await env.alice.git(work, 'rev-parse', '-q', '--verify', 'origin/main/inner')).stdout
          : '';
      const nested = await env.alice.git(work, 'push', 'origin', 'HEAD:refs/heads/main/x');
      const del = await env.alice.git(work, 'push', 'origin', ':refs/heads/main/inner');
      const ls = await env.alice.git(dir, 'ls-remote', url);
      return [
        inner === '' && warnings.length === 1
          ? 'clone ok without the inner ref, one warning'
          : `clone: ${okOrSaid(clone)}; inner "${inner.trim()}"; ${warnings.length} warnings`,
        nested.code !== 0 && /\(failed to update ref\)/.test(nested.stderr)
          ? 'a new ref inside main refused'
          : `nested push: ${okOrSaid(nested)}`,
        del.code === 0 ? 'the inner ref deleted' : `delete: ${okOrSaid(del)}`,
        ls.code === 0 && !/main\/inner/.test(ls.stdout) && !/left out/.test(ls.stderr)
          ? 'listed again without warning'
          : `ls-remote: ${okOrSaid(ls)}`,
      ].join('; ');
    },
  },
];
