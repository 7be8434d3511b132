import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isValidTid } from '@atproto/syntax';
import { decide, type Decision } from 'knotless-core/records/forge-authority';
import {
  CHECK,
  COMMENT,
  ISSUE,
  ISSUE_STATE,
  PULL,
  PROTECTION,
  PULL_STATUS,
  checkToWrite,
  parseCheck,
  parseComment,
  parseIssue,
  parseIssueState,
  parseProtection,
  parsePull,
  parsePullStatus,
  writeRecord,
} from '../src/forge/records.ts';
import { lexiconProblem } from '../src/forge/lexicons.ts';
import { FORGE_COLLECTIONS } from 'knotless-core/forge/kinds/table';
import { newTid } from 'knotless-core/tid';

const now = '2026-01-01T00:00:00.000Z';
const repo = 'at://did:plc:alice/dev.knotless.repo/site';
const pullUri = 'at://did:plc:bob/dev.knotless.pull/3kabcdefghij2';
const blob = {
  $type: 'blob',
  ref: { $link: 'bafkreibme22gw2h7y2h7tg2fhqotaqjucnbc24deqo72b6mkl2egezxhvy' },
  mimeType: 'application/x-git-packed-objects',
  size: 100,
};
const round = { head: 'a'.repeat(40), base: 'b'.repeat(40), pack: blob, createdAt: now };
const pull = {
  repo,
  base: 'main',
  head: { repo: 'at://did:plc:bob/dev.knotless.repo/site', branch: 'fix' },
  title: 'Fix',
  rounds: [round],
  createdAt: now,
};

/** JSON as a PDS lists it: what the writer sent, through JSON. */
const listed = (nsid: string, record: object) =>
  JSON.parse(JSON.stringify(writeRecord(nsid, record))) as unknown;

async function refused(p: Promise<unknown>, why: RegExp): Promise<void> {
  await assert.rejects(p, (err: Error) => {
    assert.match(err.message, why);
    assert.equal((err as { code?: string }).code, 'corrupt-remote');
    return true;
  });
}

describe('forge records', () => {
  it('reads back every record the CLI writes', async () => {
    assert.deepEqual(await parsePull(listed(PULL, pull)), pull);
    const status = {
      pull: pullUri,
      status: 'merged',
      merged: 'c'.repeat(40),
      labels: ['bug'],
      createdAt: now,
    };
    assert.deepEqual(await parsePullStatus(listed(PULL_STATUS, status)), status);
    const issue = { repo, title: 'It crashes', body: 'On start.', createdAt: now };
    assert.deepEqual(await parseIssue(listed(ISSUE, issue)), issue);
    const state = {
      issue: 'at://did:plc:bob/dev.knotless.issue/3kabcdefghij2',
      state: 'closed',
      createdAt: now,
    };
    assert.deepEqual(await parseIssueState(listed(ISSUE_STATE, state)), state);
    const comment = { subject: pullUri, round: 0, body: 'LGTM', createdAt: now };
    assert.deepEqual(await parseComment(listed(COMMENT, comment)), comment);
    const onLine = {
      subject: pullUri,
      round: 0,
      path: 'src/a.ts',
      line: 12,
      body: 'Off by one',
      createdAt: now,
    };
    assert.deepEqual(await parseComment(listed(COMMENT, onLine)), onLine);
  });

  it('refuses what the lexicons refuse: types, lengths in graphemes, formats, required fields', async () => {
    await refused(parsePull({ ...pull, title: 'x'.repeat(301) }), /title/);
    // 300 graphemes of several code units each are still 300 graphemes.
    assert.equal((await parsePull({ ...pull, title: 'e\u0301'.repeat(300) })).title.length, 600);
    await refused(parsePull({ ...pull, rounds: [] }), /rounds/);
    await refused(parsePull({ ...pull, createdAt: 'yesterday' }), /createdAt/);
    await refused(parsePull({ ...pull, repo: 'https://example.com' }), /repo/);
    await refused(parsePull({ ...pull, rounds: [{ ...round, pack: 'not a blob' }] }), /pack/);
    await refused(parseComment({ subject: pullUri, body: '', createdAt: now }), /body/);
    await refused(parseIssue('a string'), /not an object|object/);
  });

  it('refuses what a lexicon cannot say', async () => {
    await refused(parsePull({ ...pull, rounds: [{ ...round, head: 'G'.repeat(40) }] }), /names no commit/);
    await refused(parsePull({ ...pull, repo: 'at://did:plc:alice/dev.knotless.issue/x' }), /no repository/);
    await refused(parsePull({ ...pull, base: 'bad..name' }), /branch/);
    await refused(parsePull({ ...pull, head: { ...pull.head, branch: 'evil\u202e' } }), /branch/);
    await refused(
      parsePullStatus({ pull: pullUri, status: 'reopened', createdAt: now }),
      /status is unknown/,
    );
    await refused(parsePullStatus({ pull: repo, status: 'closed', createdAt: now }), /subject/);
    await refused(parseIssueState({ issue: pullUri, state: 'closed', createdAt: now }), /subject/);
    await refused(parseComment({ subject: repo, body: 'x', createdAt: now }), /subject/);
    // A line of a round's diff: path and line together, with the round, on a pull request.
    const line = { subject: pullUri, round: 0, path: 'a.txt', line: 3, body: 'x', createdAt: now };
    await refused(parseComment({ ...line, line: undefined }), /path and line come together/);
    await refused(parseComment({ ...line, path: undefined }), /path and line come together/);
    await refused(parseComment({ ...line, round: undefined }), /needs round/);
    await refused(
      parseComment({ ...line, subject: 'at://did:plc:bob/dev.knotless.issue/3kabcdefghij2' }),
      /needs round/,
    );
    await refused(parseComment({ ...line, path: 'a\u001b[2Jb' }), /terminal/);
    await refused(parseComment({ ...line, line: 0 }), /line/);
  });

  it('checks a record before writing it, with the reason as a usage error', async () => {
    await assert.rejects(
      checkToWrite(parseIssue, { repo, title: '', createdAt: now }, 'issue'),
      (err: Error) => {
        assert.equal((err as { code?: string }).code, 'usage');
        assert.match(err.message, /^The issue cannot be written: .*title/);
        return true;
      },
    );
  });

  it('makes TID record keys, increasing even within one millisecond', () => {
    const keys = Array.from({ length: 50 }, newTid);
    for (const k of keys) assert.ok(isValidTid(k), k);
    assert.deepEqual([...keys].sort(), keys);
    assert.equal(new Set(keys).size, keys.length);
  });
});

describe("the CLI's lexicon check", () => {
  it("knows the repository record and every kind in knotless-core's table of kinds, each by its own lexicon", async () => {
    // An empty record misses each lexicon's first required property: the check found its document.
    for (const c of ['dev.knotless.repo', ...FORGE_COLLECTIONS])
      assert.match((await lexiconProblem(c, {})) ?? '', /^Record must have the property "\w+"$/, c);
  });
});

describe('check records', () => {
  const check = {
    repo,
    commit: 'c'.repeat(40),
    context: 'test',
    state: 'success',
    targetUrl: 'https://ci.example.com/runs/1',
    description: 'All 12 tests passed',
    createdAt: now,
  };

  it('reads back a check as its runner writes it', async () => {
    assert.deepEqual(await parseCheck(listed(CHECK, check)), check);
    const bare = { repo, commit: 'd'.repeat(40), context: 'lint', state: 'pending', createdAt: now };
    assert.deepEqual(await parseCheck(listed(CHECK, bare)), bare);
  });

  it('refuses a hostile check: no commit id, control characters, an unknown state, no repository', async () => {
    await refused(parseCheck(listed(CHECK, { ...check, commit: 'C'.repeat(40) })), /commit/);
    await refused(parseCheck(listed(CHECK, { ...check, commit: 'main' })), /commit/);
    await refused(parseCheck(listed(CHECK, { ...check, context: 'te\x1b[2Jst' })), /control characters/);
    await refused(parseCheck(listed(CHECK, { ...check, context: '' })), /context/);
    await refused(parseCheck(listed(CHECK, { ...check, context: 'x'.repeat(101) })), /context/);
    await refused(parseCheck(listed(CHECK, { ...check, state: 'passed' })), /state is unknown/);
    await refused(
      parseCheck(listed(CHECK, { ...check, repo: 'at://did:plc:alice/dev.knotless.issue/3kabcdefghij2' })),
      /no repository/,
    );
    await refused(parseCheck(listed(CHECK, { ...check, targetUrl: 'javascript:alert(1)' })), /targetUrl/);
    await refused(parseCheck(listed(CHECK, { ...check, description: 'one\ntwo' })), /one line/);
    await refused(parseCheck(listed(CHECK, { ...check, description: 'é'.repeat(301) })), /description/);
  });
});

describe('a merge that overrode checks', () => {
  const status = { pull: pullUri, status: 'merged', merged: 'c'.repeat(40), createdAt: now };

  it("reads back a merged status's ignoredChecks, and refuses them on another state or with control characters", async () => {
    const ignored = { ...status, ignoredChecks: ['test: failing (failure by bob.test)'] };
    assert.deepEqual(await parsePullStatus(listed(PULL_STATUS, ignored)), ignored);
    await refused(
      parsePullStatus(listed(PULL_STATUS, { ...ignored, status: 'closed', merged: undefined })),
      /ignoredChecks/,
    );
    await refused(
      parsePullStatus(listed(PULL_STATUS, { ...status, ignoredChecks: ['te\x1b[2Jst'] })),
      /ignoredChecks/,
    );
  });
});

describe('protection records', () => {
  const branch = {
    branch: 'main',
    requiredChecks: ['test'],
    trustedRunners: ['did:plc:bob'],
    allowForcePush: false,
    allowDeletion: true,
  };
  const protection = { repo, branches: [branch], createdAt: now };

  it('reads back a protection as the owner writes it; an absent allowance is no allowance', async () => {
    assert.deepEqual(await parseProtection(listed(PROTECTION, protection)), protection);
    const bare = { repo, branches: [{ branch: 'release/1' }], createdAt: now };
    assert.deepEqual(await parseProtection(listed(PROTECTION, bare)), {
      ...bare,
      branches: [
        {
          branch: 'release/1',
          requiredChecks: [],
          trustedRunners: [],
          allowForcePush: false,
          allowDeletion: false,
        },
      ],
    });
  });

  it('refuses a hostile protection: a bad branch, one twice, a runner no DID, control characters', async () => {
    const p = (b: object) =>
      parseProtection(listed(PROTECTION, { ...protection, branches: [{ ...branch, ...b }] }));
    await refused(p({ branch: 'ma..in' }), /branch name/);
    await refused(
      parseProtection(listed(PROTECTION, { ...protection, branches: [branch, branch] })),
      /twice/,
    );
    await refused(p({ trustedRunners: ['bob.example.com'] }), /trustedRunners/);
    await refused(p({ requiredChecks: ['te\x1b[2Jst'] }), /control characters/);
    await refused(p({ requiredChecks: [''] }), /requiredChecks/);
    await refused(p({ allowForcePush: 'yes' }), /allowForcePush/);
    await refused(
      parseProtection(
        listed(PROTECTION, { ...protection, repo: 'at://did:plc:alice/dev.knotless.issue/3kabcdefghij2' }),
      ),
      /no repository/,
    );
  });
});

describe('the authority rule', () => {
  const owner = 'did:plc:alice';
  const author = 'did:plc:bob';
  const d = (
    by: string,
    state: string,
    createdAt: string,
    rkey = createdAt,
    more = {},
  ): Decision<string> => ({
    by,
    rkey,
    state,
    createdAt,
    ...more,
  });
  const rule = (list: Decision<string>[]) => decide(list, owner, author, ['open', 'closed']);

  it('is open with no decision, and ignores every account but the owner and the author', () => {
    assert.deepEqual(rule([]), { state: 'open', labels: [] });
    assert.equal(
      rule([d('did:plc:carol', 'merged', '2026-01-02T00:00:00Z', 'a', { merged: 'c'.repeat(40) })]).state,
      'open',
    );
    assert.equal(rule([d('did:plc:carol', 'closed', '2026-01-02T00:00:00Z')]).state, 'open');
  });

  it('lets the author close and reopen their own, but never merge or label', () => {
    assert.equal(rule([d(author, 'closed', '2026-01-02T00:00:00Z')]).state, 'closed');
    const claimed = rule([
      d(author, 'merged', '2026-01-02T00:00:00Z', 'a', { merged: 'c'.repeat(40), labels: ['x'] }),
    ]);
    assert.deepEqual(claimed, { state: 'open', labels: [] });
    assert.deepEqual(rule([d(author, 'closed', '2026-01-02T00:00:00Z', 'a', { labels: ['x'] })]).labels, []);
  });

  it("ranks the owner's close above the author's reopen, whatever either says of its date", () => {
    const closed = d(owner, 'closed', '2026-01-02T00:00:00Z', '3a', { labels: ['wontfix'] });
    for (const when of ['2099-01-01T00:00:00Z', '1970-01-01T00:00:00Z'])
      for (const key of ['3b', 'zzzzzzzzzzzzz', '2']) {
        const list = [closed, d(author, 'open', when, key), d('did:plc:carol', 'open', when, key)];
        assert.deepEqual(rule(list), { state: 'closed', labels: ['wontfix'], by: owner }, `${when} ${key}`);
      }
  });

  it("keeps the author's withdrawal against the owner's reopen; each may reopen their own close", () => {
    const withdrawn = d(author, 'closed', '2026-01-02T00:00:00Z', '3a');
    assert.deepEqual(rule([withdrawn, d(owner, 'open', '2099-01-01T00:00:00Z', '3b')]), {
      state: 'closed',
      labels: [],
      by: author,
    });
    assert.equal(rule([withdrawn, d(author, 'open', '1970-01-01T00:00:00Z', '3b')]).state, 'open');
    const ownerClosed = d(owner, 'closed', '2099-01-01T00:00:00Z', '3a');
    assert.equal(rule([ownerClosed, d(owner, 'open', '1970-01-01T00:00:00Z', '3b')]).state, 'open');
  });

  it("orders one account's decisions by record key, never by createdAt", () => {
    const list = [
      d(owner, 'closed', '2099-01-01T00:00:00Z', '3a'),
      d(owner, 'open', '2000-01-01T00:00:00Z', '3b', { labels: ['bug'] }),
    ];
    assert.deepEqual(rule(list), { state: 'open', labels: ['bug'], by: owner });
    assert.equal(
      decide([d(owner, 'closed', 'x', '3b'), d(owner, 'open', 'y', '3a')], owner, owner, ['open', 'closed'])
        .state,
      'closed',
    );
  });

  it("does not let the author reopen what the owner merged, and keeps the owner's merged commit", () => {
    const list = [
      d(owner, 'merged', '2026-01-02T00:00:00Z', 'a', { merged: 'c'.repeat(40) }),
      d(author, 'open', '2026-01-03T00:00:00Z', 'b'),
    ];
    assert.deepEqual(rule(list), { state: 'merged', labels: [], by: owner, merged: 'c'.repeat(40) });
  });
});
