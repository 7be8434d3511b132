// `npm run bench:appview-team`: what a team of 50 maintainers costs the appview's index. An owner's
// table of 100 branches listing 50 maintainers, and each maintainer's own table (a branch of theirs,
// and main moved on from the owner's value), applied as the stream brings them; then the team's
// refs read (what every page, mirror sync, listRefs and getRepo does) many times. Prints the
// database statements per maintainer's event and per read, and the read's time (median of 200),
// on SQLite in memory and, when KNOTLESS_BENCH_PG names a database, on PostgreSQL.
import { performance } from 'node:perf_hooks';
import { jsonToLex } from '@atproto/lexicon';
import { cidForRecord } from '@atproto/repo';
import type { KyselyPlugin } from 'kysely';
import { applyRefUpdates, layoutRefTable, refTableKey } from 'knotless-core/records/ref-table';
import { openDatabase } from '../packages/knotless-serve/src/db/open.ts';
import { Index } from '../packages/knotless-serve/src/db/index-store.ts';

const MAINTAINERS = 50;
const BRANCHES = 100;
const READS = 200;
const OWNER = 'did:plc:ownerownerownerowner00';
const REPO = 'team';
const member = (i: number) =>
  `did:plc:member${i
    .toString(26)
    .split('')
    .map((c) => String.fromCharCode(97 + parseInt(c, 26)))
    .join('')
    .padStart(18, 'a')}`;
const oid = (i: number) => i.toString(16).padStart(40, '0');
const cidOf = async (value: Record<string, unknown>) =>
  (await cidForRecord(jsonToLex(value) as Parameters<typeof cidForRecord>[0])).toString();

let statements = 0;
const counter: KyselyPlugin = {
  transformQuery: (args) => {
    statements++;
    return args.node;
  },
  transformResult: (args) => Promise.resolve(args.result),
};

async function run(conn: string, label: string): Promise<void> {
  const opened = await openDatabase(conn);
  const index = new Index(opened.db.withPlugin(counter), opened.engine);
  const uri = `at://${OWNER}/dev.knotless.repo/${REPO}`;
  const since = new Date().toISOString();
  const owner = applyRefUpdates(
    undefined,
    Array.from({ length: BRANCHES }, (_, i) => ({
      ref: `refs/heads/b${i}`,
      target: oid(i + 1),
      packs: [],
    })).concat([{ ref: 'refs/heads/main', target: oid(100_000), packs: [] }]),
    { repo: uri, head: 'refs/heads/main', maintainer: false },
    new Date(),
  );
  owner.maintainers = Array.from({ length: MAINTAINERS }, (_, i) => ({ did: member(i), since }));
  const ownerWrites = await layoutRefTable(owner, REPO, cidOf);
  const time = new Date().toISOString();
  let rev = 0;
  const nextRev = () => `3l${String(rev++).padStart(11, '0')}`;
  await index.applyRefTable({
    did: OWNER,
    rkey: REPO,
    rev: nextRev(),
    cid: await cidOf(ownerWrites.table),
    record: ownerWrites.table,
    time,
  });
  const perEvent: number[] = [];
  for (let i = 0; i < MAINTAINERS; i++) {
    const table = applyRefUpdates(
      undefined,
      [
        { ref: `refs/heads/m${i}`, target: oid(200_000 + i), packs: [], over: [{ did: OWNER }] },
        // Each moves main on from the owner's value: they diverge from one another.
        {
          ref: 'refs/heads/main',
          target: oid(300_000 + i),
          packs: [],
          over: [{ did: OWNER, target: oid(100_000) }],
        },
      ],
      { repo: uri, maintainer: true },
      new Date(),
    );
    const key = refTableKey(REPO, OWNER, member(i));
    const writes = await layoutRefTable(table, key, cidOf);
    const before = statements;
    await index.applyRefTable({
      did: member(i),
      rkey: key,
      rev: nextRev(),
      cid: await cidOf(writes.table),
      record: writes.table,
      time,
    });
    perEvent.push(statements - before);
  }
  const before = statements;
  const refs = await index.refs(OWNER, REPO);
  const perRead = statements - before;
  const times: number[] = [];
  for (let i = 0; i < READS; i++) {
    const t0 = performance.now();
    await index.refs(OWNER, REPO);
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)]!;
  const p95 = times[Math.floor(times.length * 0.95)]!;
  perEvent.sort((a, b) => a - b);
  console.log(
    `${label}: ${MAINTAINERS} maintainers, ${BRANCHES + 1} owner branches → ${refs.length} refs listed ` +
      `(${refs.filter((r) => r.diverged !== undefined).length} diverged values apart); ` +
      `statements per maintainer's table event: ${perEvent[0]}–${perEvent[perEvent.length - 1]}; ` +
      `statements per read of the team's refs: ${perRead}; read time median ${median.toFixed(2)} ms, p95 ${p95.toFixed(2)} ms`,
  );
  await index.close();
}

await run(':memory:', 'SQLite');
const pg = process.env['KNOTLESS_BENCH_PG'];
if (pg !== undefined) await run(pg, 'PostgreSQL');
