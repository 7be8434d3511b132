// A push that writes ref records (KNOTLESS_REF_TABLE=0) racing a migration of the same repository
// onto its ref table (format.md, "Old repositories"): the push lists the refs as records, its first
// record write is held at a proxy while `knotless repo migrate` runs on another machine (to its end,
// or killed just after the table is written, leaving the records), and then lands. Whatever the push
// was told landed must be what a reader of the repository sees: every race ends with 0 acknowledged
// updates lost, for an update, a create, a delete, a forced update and an atomic push.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { knotless, runProcess } from './helpers/cli.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { lsRemote, tableHands } from './helpers/ref-table.ts';

const t = useNetwork(['alice.test']);
/** A machine that keeps repositories on ref records (the pusher in every race). */
const records = useGitUser(t, 'alice.test', () => ({ KNOTLESS_REF_TABLE: '0' }));
/** Another machine of the same account, with the default: the one that migrates. */
const migrator = useGitUser(t, 'alice.test');
const { readTable, refRecords } = tableHands(t, 'alice.test');

let proxy: Proxy | undefined;
/** When set, the next record write through the proxy waits for `release` after calling `held`. */
let gate: { held: () => void; release: Promise<void> } | undefined;
const WRITES = new Set(
  ['putRecord', 'applyWrites', 'deleteRecord', 'createRecord'].map((w) => `com.atproto.repo.${w}`),
);

before(async () => {
  await t.ready;
  proxy = await startProxy({
    target: t.net.pdsUrl,
    onRequest: async (req) => {
      if (gate === undefined || req.nsid === undefined || !WRITES.has(req.nsid)) return;
      const g = gate;
      gate = undefined;
      g.held();
      await g.release;
    },
  });
});
after(() => proxy?.close());

/** Runs `run` with its first record write held at the proxy until `meanwhile` is done. */
async function held<T>(run: () => Promise<T>, meanwhile: () => Promise<void>): Promise<T> {
  let held!: () => void;
  let release!: () => void;
  const isHeld = new Promise<void>((r) => (held = r));
  gate = { held, release: new Promise<void>((r) => (release = r)) };
  const running = run();
  // A push that ends before writing anything would leave the gate set: fail instead of waiting.
  const ended = running.then((r) => {
    throw new Error(`the push ended before its record write was held: ${JSON.stringify(r)}`);
  });
  await Promise.race([isHeld, ended]);
  try {
    await meanwhile();
  } finally {
    release();
  }
  return running;
}

type Kind = 'update' | 'create' | 'delete' | 'force' | 'atomic';
type Timing = 'migrated' | 'killed';

/**
 * One race: a repository on ref records with main and `gone`, a push of `kind` by the records
 * machine held at its first record write while the migration runs (`migrated`: to its end, the
 * records deleted; `killed`: SIGKILLed once the table is written, the records left), then released.
 * Returns what the push was told and what the repository holds afterwards.
 */
async function race(kind: Kind, timing: Timing, round: number) {
  const name = `race-${kind}-${timing}-${round}`;
  const url = `knotless://alice.test/${name}`;
  const made = await records.knotless('repo', 'create', name);
  assert.equal(made.code, 0, made.stderr);
  const dir = await newRepo(records, url);
  const base = await commitFiles(records, dir, { 'a.txt': 'a\n' }, 'base');
  await records.ok(dir, 'push', '-q', 'origin', 'main', 'main:refs/heads/gone');
  assert.equal(await readTable(name), undefined, 'the repository starts on ref records');
  await records.ok(dir, 'checkout', '-q', '-b', 'side');
  const side = await commitFiles(records, dir, { 'b.txt': 'side\n' }, 'side');
  await records.ok(dir, 'checkout', '-q', 'main');
  const tip = await commitFiles(records, dir, { 'c.txt': 'tip\n' }, 'tip');
  const args: Record<Kind, string[]> = {
    update: ['main'],
    create: ['main:refs/heads/new'],
    delete: [':refs/heads/gone'],
    force: ['+side:refs/heads/main'],
    atomic: ['--atomic', 'main', 'side:refs/heads/new'],
  };
  const env = {
    ...records.env,
    KNOTLESS_REF_TABLE: '0',
    KNOTLESS_SERVICE: proxy!.url,
  };
  const pushed = await held(
    () => runProcess('git', ['push', 'origin', ...args[kind]], { env, cwd: dir }),
    async () => {
      const m = await knotless(
        ['repo', 'migrate', name],
        timing === 'killed'
          ? { env: { ...migrator.env, KNOTLESS_CRASH_AT: 'migrate:table-written' } }
          : { env: migrator.env },
      );
      if (timing === 'killed') assert.equal(m.code, null, `not killed: ${m.stderr}`);
      else assert.equal(m.code, 0, m.stderr);
    },
  );
  const after = lsRemote(await migrator.ok(migrator.dir(), 'ls-remote', url));
  const want: Record<Kind, Map<string, string | undefined>> = {
    update: new Map([['refs/heads/main', tip]]),
    create: new Map([['refs/heads/new', tip]]),
    delete: new Map([['refs/heads/gone', undefined]]),
    force: new Map([['refs/heads/main', side]]),
    atomic: new Map([
      ['refs/heads/main', tip],
      ['refs/heads/new', side],
    ]),
  };
  return {
    pushed,
    after,
    want: want[kind],
    base,
    table: await readTable(name),
    left: [...(await refRecords(name)).keys()],
  };
}

describe('a ref-record push racing a migration onto the ref table', () => {
  const kinds: Kind[] = ['update', 'create', 'delete', 'force', 'atomic'];
  for (const timing of ['migrated', 'killed'] as Timing[])
    it(`loses no acknowledged update when the migration ${timing === 'migrated' ? 'ends' : 'is killed after the table'} while the write is held`, async () => {
      let acknowledged = 0;
      const lost: string[] = [];
      const unsaid: string[] = [];
      for (let round = 0; round < 1; round++)
        for (const kind of kinds) {
          const { pushed, after, want, base, table, left } = await race(kind, timing, round);
          assert.notEqual(table, undefined, 'the migration wrote the table');
          // A forced update whose record the migration deleted meanwhile is refused as git refuses a
          // force over a value it was not shown ("stale info"): told so, it is no acknowledged loss.
          if (kind === 'force' && pushed.code !== 0) {
            assert.match(pushed.stderr, /\(stale info\)/);
            assert.equal(after.get('refs/heads/main'), base, 'a refused force changed nothing');
            continue;
          }
          // No rival writes these refs: each push lands.
          assert.equal(pushed.code, 0, `${kind}: ${pushed.stderr}`);
          if (!/was moved onto its ref table while this push wrote ref records/.test(pushed.stderr))
            unsaid.push(`${kind} round ${round}: ${pushed.stderr}`);
          // The records the push wrote before it found the table are removed once the table holds
          // them (a killed migration leaves its own, which the next one deletes).
          if (timing === 'migrated') assert.deepEqual(left, [], `${kind}: ref records left beside the table`);
          for (const [ref, oid] of want) {
            acknowledged++;
            if (after.get(ref) !== oid)
              lost.push(`${kind} round ${round}: ${ref} is ${after.get(ref)}, not ${oid}`);
          }
        }
      assert.deepEqual(lost, [], `${lost.length} of ${acknowledged} acknowledged updates lost`);
      // The move is said once, in one line.
      assert.deepEqual(unsaid, []);
    });
});
