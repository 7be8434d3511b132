// `node bench/many-refs.ts`: what a mirror push of ~4,000 refs costs on the reference PDS, and whether
// parallelism helps: batch creates one after another or overlapping, and listing them page after page
// or several key ranges at once. Plain http through the devnet's delay link, at
// each RTT; figures are medians of --rounds. See docs/reference/performance.md.
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { makeClient } from './client.ts';
import { startRig } from './setup.ts';

const { values } = parseArgs({
  options: {
    rtt: { type: 'string', default: '0,50' },
    refs: { type: 'string', default: '4000' },
    rounds: { type: 'string', default: '3' },
  },
});
const rtts = values.rtt.split(',').map(Number);
const total = Number(values.refs);
const rounds = Number(values.rounds);
const COLLECTION = 'dev.knotless.ref';

/** A real repository's shape: a few dozen branches and tags, the rest GitHub's refs/pull/N/{head,merge}. */
function refNames(n: number): string[] {
  const heads = Array.from({ length: 60 }, (_, i) => `refs/heads/branch-${i}`);
  const tags = Array.from({ length: 50 }, (_, i) => `refs/tags/v1.${i}.0`);
  const pulls: string[] = [];
  for (let i = 1; heads.length + tags.length + pulls.length < n; i++)
    pulls.push(`refs/pull/${i}/head`, `refs/pull/${i}/merge`);
  return [...heads, ...tags, ...pulls].slice(0, n);
}

const encode = (ref: string) => ref.replaceAll('/', '_');

const rig = await startRig(rtts, true);
try {
  const client = await makeClient(rig, true);
  let accounts = 0;
  /** A fresh account, so that each run writes into an empty repository (the PDS slows as one grows). */
  const account = async (): Promise<{ did: string; jwt: string; handle: string }> => {
    const handle = `refs${++accounts}.test`;
    await rig.net.ensureAccount(handle, rig.password);
    const res = (await (
      await fetch(`${rig.net.pdsUrl}/xrpc/com.atproto.server.createSession`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ identifier: handle, password: rig.password }),
      })
    ).json()) as { did: string; accessJwt: string };
    return { did: res.did, jwt: res.accessJwt, handle };
  };

  for (const rtt of rtts) {
    const base = `http://127.0.0.1:${rig.links.get(rtt)!.pds.port}/xrpc`;
    const post = async (jwt: string, body: unknown): Promise<void> => {
      const res = await fetch(`${base}/com.atproto.repo.applyWrites`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${jwt}` },
        body: JSON.stringify(body),
      });
      if (!res.ok) throw new Error(`applyWrites: ${res.status} ${await res.text()}`);
      await res.arrayBuffer();
    };
    let did = '';
    let handle = '';
    const page = async (
      cursor: string | undefined,
      reverse: boolean,
    ): Promise<{ keys: string[]; cursor?: string }> => {
      const q = new URLSearchParams({ repo: did, collection: COLLECTION, limit: '100' });
      if (reverse) q.set('reverse', 'true');
      if (cursor !== undefined) q.set('cursor', cursor);
      const res = await fetch(`${base}/com.atproto.repo.listRecords?${q}`);
      if (!res.ok) throw new Error(`listRecords: ${res.status} ${await res.text()}`);
      const body = (await res.json()) as { records: { uri: string }[]; cursor?: string };
      return {
        keys: body.records.map((r) => r.uri.slice(r.uri.lastIndexOf('/') + 1)),
        ...(body.cursor === undefined ? {} : { cursor: body.cursor }),
      };
    };
    /** Ascending from `lo` (exclusive) while keys are below `hi`: today's listing, bounded. */
    const ascending = async (lo: string, hi: string): Promise<string[]> => {
      const out: string[] = [];
      let cursor: string | undefined = lo;
      for (;;) {
        const p = await page(cursor, true);
        for (const k of p.keys) if (k < hi) out.push(k);
        if (p.keys.length < 100 || p.keys.at(-1)! >= hi || p.cursor === undefined) return out;
        cursor = p.cursor;
      }
    };
    /** One range read from both ends at once, the two walks stopping where they meet. */
    const twoEnded = async (lo: string, hi: string): Promise<string[]> => {
      const up: string[] = [];
      const down: string[] = [];
      let met = false;
      const walk = async (asc: boolean): Promise<void> => {
        let cursor: string | undefined = asc ? lo : hi;
        for (;;) {
          const p = await page(cursor, asc);
          for (const k of p.keys) {
            if (asc ? k >= hi : k <= lo) return;
            if (asc ? down.length > 0 && k >= down.at(-1)! : up.length > 0 && k <= up.at(-1)!) {
              met = true;
              return;
            }
            (asc ? up : down).push(k);
          }
          if (met || p.keys.length < 100 || p.cursor === undefined) return;
          cursor = p.cursor;
        }
      };
      await Promise.all([walk(true), walk(false)]);
      return [...new Set([...up, ...down.reverse()])];
    };
    const ranges = (repo: string, cuts: string[]): Array<[string, string]> => {
      const bounds = [`${repo}~`, ...cuts.map((c) => `${repo}~${c}`), `${repo}~\x7f`];
      return bounds.slice(1).map((hi, i) => [bounds[i]!, hi]);
    };

    const batches = (did: string, repo: string) => {
      const names = refNames(total);
      const writes = names.map((ref) => ({
        $type: 'com.atproto.repo.applyWrites#create',
        collection: COLLECTION,
        rkey: `${repo}~${encode(ref)}`,
        value: {
          $type: COLLECTION,
          repo,
          ref,
          target: 'a'.repeat(40),
          packs: [],
          updatedAt: new Date().toISOString(),
        },
      }));
      const out = [];
      for (let i = 0; i < writes.length; i += 199) out.push({ repo: did, writes: writes.slice(i, i + 199) });
      return out;
    };
    const timeCreates = async (parallel: number): Promise<{ ms: number; did: string; handle: string }> => {
      const who = await account();
      const all = batches(who.did, 'r');
      const t0 = performance.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: parallel }, async () => {
          while (next < all.length) await post(who.jwt, all[next++]);
        }),
      );
      return { ms: performance.now() - t0, did: who.did, handle: who.handle };
    };
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const show = (what: string, xs: number[]) =>
      console.log(
        `rtt ${rtt} ms: ${what}: ${median(xs).toFixed(0)} ms (${xs.map((t) => t.toFixed(0)).join(', ')})`,
      );

    // Rounds interleave the variants, so that a busy moment of the machine falls on all of them.
    const parallels = [1, 2, 4];
    const created = new Map(parallels.map((p) => [p, [] as number[]]));
    for (let r = 0; r < rounds; r++) {
      for (const parallel of parallels) {
        const run = await timeCreates(parallel);
        created.get(parallel)!.push(run.ms);
        did = run.did;
        handle = run.handle;
      }
    }
    for (const parallel of parallels)
      show(`create ${total} refs, ${parallel} batch(es) in flight`, created.get(parallel)!);

    const repo = 'r';
    const strategies: Array<[string, () => Promise<string[]>]> = [
      ['pages one after another (before)', () => ascending(`${repo}~`, `${repo}~\x7f`)],
      [
        'first page, then both ends (list-range.ts)',
        async () => {
          const first = await page(`${repo}~`, true);
          const keys = first.keys.filter((k) => k.startsWith(`${repo}~`));
          if (keys.length < 100) return keys;
          return [...keys, ...(await twoEnded(keys.at(-1)!, `${repo}~\x7f`))];
        },
      ],
      [
        'heads / pull / tags+rest, each from both ends',
        async () =>
          (
            await Promise.all(ranges(repo, ['refs_pull', 'refs_tags']).map(([lo, hi]) => twoEnded(lo, hi)))
          ).flat(),
      ],
      [
        '16 ranges (pull split by digit), each from both ends',
        async () =>
          (
            await Promise.all(
              ranges(repo, [
                'refs_pull',
                ...'123456789'.split('').map((d) => `refs_pull_${d}`),
                'refs_tags',
              ]).map(([lo, hi]) => twoEnded(lo, hi)),
            )
          ).flat(),
      ],
    ];
    const listed = new Map(strategies.map(([name]) => [name, [] as number[]]));
    for (let r = 0; r < rounds; r++) {
      for (const [name, run] of strategies) {
        const t0 = performance.now();
        const keys = await run();
        listed.get(name)!.push(performance.now() - t0);
        const count = new Set(keys).size;
        if (count !== total) throw new Error(`${name}: listed ${count} of ${total}`);
      }
    }
    for (const [name] of strategies) show(`list ${total} refs, ${name}`, listed.get(name)!);
    // The same listing as git gets it: `git ls-remote` through the helper as built (npm run build).
    const lsRemote: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const res = await client.git(rtt, client.home, ['ls-remote', `knotless://${handle}/r`]);
      const count = res.stdout.trim().split('\n').length;
      if (count !== total) throw new Error(`git ls-remote listed ${count} of ${total}`);
      lsRemote.push(res.ms);
    }
    show(`git ls-remote of ${total} refs (the helper as built)`, lsRemote);
  }
} finally {
  await rig.close();
}
