// Convergence: pushes, issues, comments and decisions from accounts on two PDSes, while the appview
// (the installed bundle, following the relay stand-in) is killed with SIGKILL at random moments and
// the relay loses a third of its frames on the way. At the end the index holds exactly the PDSes'
// knotless records, record for record: the periodic re-reading (--recheck) is what brings the
// frames nobody said were lost.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import Sqlite from 'better-sqlite3';
import { startRelay, type Relay } from 'knotless-devnet';
import { useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import { waitFor } from './helpers.ts';

const BIN = path.resolve(import.meta.dirname, '../bin/knotless-serve.cjs');
const t = useNetwork(['alice.test', 'bob.test'], { pdses: 2 });
const alice = useGitUser(t, 'alice.test');
const bob = useGitUser(t, 'bob.test');
const COLLECTIONS = [
  'dev.knotless.repo',
  // A repository's refs: its ref table (where `repo create` starts it), or ref records (older ones).
  'dev.knotless.refs',
  'dev.knotless.ref',
  'dev.knotless.issue',
  'dev.knotless.issue.state',
  'dev.knotless.comment',
];

let relay: Relay | undefined;
let child: ChildProcess | undefined;

function startServe(data: string): ChildProcess {
  const c = spawn(
    process.execPath,
    [
      BIN,
      '--relay',
      relay!.url,
      '--dev',
      '--plc',
      t.net.plcUrl,
      '--data',
      data,
      '--port',
      '0',
      '--recheck',
      '2000',
    ],
    { stdio: ['ignore', 'ignore', 'ignore'] },
  );
  child = c;
  return c;
}

/** What the PDSes hold: `did collection rkey cid` lines (a repository record without its cid). */
async function onPdses(): Promise<string[]> {
  const out: string[] = [];
  for (const h of ['alice.test', 'bob.test']) {
    const did = t.dids[h]!;
    for (const c of COLLECTIONS) {
      const res = await fetch(
        `${t.pdsOf[h]}/xrpc/com.atproto.repo.listRecords?repo=${did}&collection=${c}&limit=100`,
      );
      const { records } = (await res.json()) as { records: { uri: string; cid: string }[] };
      for (const r of records) {
        const rkey = r.uri.split('/').at(-1)!;
        out.push(c === 'dev.knotless.repo' ? `${did} ${c} ${rkey}` : `${did} ${c} ${rkey} ${r.cid}`);
      }
    }
  }
  return out.sort();
}

/** What the index holds, in the same form. */
function inIndex(file: string): string[] {
  const db = new Sqlite(file, { readonly: true, fileMustExist: true });
  try {
    const rows = (sql: string) => db.prepare(sql).all() as { line: string }[];
    return [
      ...rows(`select did || ' dev.knotless.repo ' || name as line from repos where deleted = 0`),
      ...rows(
        `select did || ' dev.knotless.refs ' || rkey || ' ' || cid as line from ref_tables where deleted = 0`,
      ),
      ...rows(`select did || ' dev.knotless.ref ' || rkey || ' ' || cid as line from refs where deleted = 0`),
      ...rows(
        `select did || ' dev.knotless.issue ' || rkey || ' ' || cid as line from issues where deleted = 0`,
      ),
      ...rows(
        `select did || ' dev.knotless.issue.state ' || rkey || ' ' || cid as line from issue_states where deleted = 0`,
      ),
      ...rows(
        `select did || ' dev.knotless.comment ' || rkey || ' ' || cid as line from comments where deleted = 0`,
      ),
    ]
      .map((r) => r.line)
      .sort();
  } finally {
    db.close();
  }
}

describe('convergence under kills and lost frames', () => {
  // Inside the suite, before the network closes: the PDSes wait for open streams as they close.
  after(async () => {
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child!.once('exit', r));
      child.kill('SIGKILL');
      await gone;
    }
    await relay?.close();
  });
  it('ends with the index equal to the PDSes, record for record', async () => {
    await t.ready;
    // A third of the frames never reach the appview, and nothing says so.
    relay = await startRelay({ pdses: t.net.pdses.map((p) => p.url), drop: (seq) => seq % 3 === 0 });
    const data = t.tmpdir();
    const file = path.join(data, 'f.txt');
    for (let round = 0; round < 3; round++) {
      const c = startServe(data);
      const exited = new Promise((r) => c.once('exit', r));
      // Killed at a random moment of the round's writes.
      const kill = setTimeout(() => c.kill('SIGKILL'), Math.floor(Math.random() * 4000));
      const repo = `chaos-${round}`;
      assert.equal((await alice.knotless('repo', 'create', repo)).code, 0);
      fs.writeFileSync(file, `round ${round}\n`);
      const pushed = await alice.knotless(
        'repo',
        'commit',
        repo,
        '-m',
        `round ${round}`,
        '--add',
        `r${round}.txt=${file}`,
      );
      assert.equal(pushed.code, 0, pushed.stderr);
      const made = await bob.knotless(
        'issue',
        'create',
        `alice.test/${repo}`,
        '--title',
        `issue ${round}`,
        '--json',
      );
      assert.equal(made.code, 0, made.stderr);
      const id = (JSON.parse(made.stdout) as { id: string }).id;
      assert.equal(
        (await alice.knotless('issue', 'comment', `alice.test/${repo}`, id, '--body', `seen ${round}`)).code,
        0,
      );
      assert.equal((await alice.knotless('issue', 'close', `alice.test/${repo}`, id)).code, 0);
      // The kill comes, during the writes or after them.
      await exited;
      clearTimeout(kill);
    }
    // The last start is left running: it must converge on its own.
    startServe(data);
    const want = await onPdses();
    assert.ok(want.length >= 3 * 5, want.join('\n'));
    await waitFor('the index to equal the PDSes', () => {
      const db = path.join(data, 'index.sqlite');
      return Promise.resolve(
        fs.existsSync(db) && JSON.stringify(inIndex(db)) === JSON.stringify(want) ? true : undefined,
      );
    });
  });
});
