// The authority rule with a team (format.md, "The authority rule"): the owner and the maintainers
// the owner's table lists decide as one, by their latest record; the author keeps their own close;
// nobody else counts; a removed maintainer counts for nothing; and a team member's next decision
// is keyed after the team's latest, whoever's clock ran ahead.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decide, heldDecision, type Decision, type Team } from '../src/records/forge-authority.ts';
import { maintainerList, maintainersOf } from '../src/records/maintainers.ts';
import { checkOutcome, checkStateWrite, decisionKey, type StateWrite } from '../src/forge/state-write.ts';
import { alreadyDecided, checkLabelWrite, labelDecision } from '../src/forge/decision.ts';
import { isTid, newTid, tidAfter, tidMicros } from '../src/tid.ts';

const OWNER = 'did:plc:owner';
const ANN = 'did:plc:ann';
const BEN = 'did:plc:ben';
const AUTHOR = 'did:plc:author';
const EVE = 'did:plc:eve';
const TEAM: Team = { owner: OWNER, maintainers: [ANN, BEN] };
const MAY = ['open', 'closed'] as const;

const d = (
  by: string,
  rkey: string,
  state: string,
  more: Partial<Decision<string>> = {},
): Decision<string> => ({
  by,
  rkey,
  state,
  createdAt: '2026-01-01T00:00:00.000Z',
  ...more,
});
const rule = (list: Decision<string>[], team: Team = TEAM) => decide(list, team, AUTHOR, MAY);

describe('the authority rule with maintainers', () => {
  it("takes the team's latest record, whoever in the team wrote it, with its labels", () => {
    assert.deepEqual(rule([d(OWNER, '3a', 'closed', { labels: ['bug'] }), d(ANN, '3b', 'open')]), {
      state: 'open',
      labels: [],
      by: ANN,
    });
    assert.deepEqual(rule([d(ANN, '3a', 'closed'), d(OWNER, '3b', 'open', { labels: ['x'] })]), {
      state: 'open',
      labels: ['x'],
      by: OWNER,
    });
    const merged = rule([d(BEN, '3c', 'merged', { merged: 'c'.repeat(40) }), d(AUTHOR, '3d', 'closed')]);
    assert.deepEqual(merged, { state: 'merged', labels: [], by: BEN, merged: 'c'.repeat(40) });
  });

  it("keeps the author's withdrawal against the team, and the team's close against the author", () => {
    assert.equal(rule([d(AUTHOR, '3a', 'closed'), d(ANN, '3b', 'open')]).state, 'closed');
    assert.equal(rule([d(ANN, '3a', 'closed'), d(AUTHOR, '3z', 'open')]).state, 'closed');
    assert.equal(rule([d(ANN, '3a', 'closed'), d(AUTHOR, '3z', 'open')]).by, ANN);
  });

  it('ignores everyone outside the team, whatever their key, and a maintainer no longer listed', () => {
    const list = [
      d(ANN, '3a', 'closed', { labels: ['a'] }),
      d(EVE, 'zzzzzzzzzzzzz', 'open', { labels: ['spam'] }),
    ];
    assert.deepEqual(rule(list), { state: 'closed', labels: ['a'], by: ANN });
    const removed = { owner: OWNER, maintainers: [BEN] };
    assert.deepEqual(rule([d(OWNER, '3a', 'open', { labels: ['o'] }), d(ANN, '3b', 'closed')], removed), {
      state: 'open',
      labels: ['o'],
      by: OWNER,
    });
    // A DID alone is the owner with no maintainers, as before teams.
    assert.equal(decide([d(ANN, '3b', 'closed')], OWNER, AUTHOR, MAY).state, 'open');
  });

  it('lets an author who maintains the repository decide as the team', () => {
    const team = { owner: OWNER, maintainers: [AUTHOR] };
    assert.equal(rule([d(OWNER, '3a', 'closed'), d(AUTHOR, '3b', 'open')], team).state, 'open');
    assert.equal(
      rule([d(OWNER, '3a', 'open'), d(AUTHOR, '3b', 'merged', { merged: 'a'.repeat(40) })], team).state,
      'merged',
    );
  });

  it("orders two accounts' records with one key by DID, the same way everywhere", () => {
    const a = rule([d(BEN, '3a', 'closed'), d(ANN, '3a', 'open')]);
    const b = rule([d(ANN, '3a', 'open'), d(BEN, '3a', 'closed')]);
    assert.deepEqual(a, b);
    assert.equal(a.by, ANN);
  });

  it("names the decision the owner copies before a maintainer's removal: theirs when it is the team's latest", () => {
    assert.equal(heldDecision([d(OWNER, '3a', 'open'), d(ANN, '3b', 'closed')], TEAM, ANN)?.rkey, '3b');
    assert.equal(heldDecision([d(OWNER, '3c', 'open'), d(ANN, '3b', 'closed')], TEAM, ANN), undefined);
    assert.equal(heldDecision([d(ANN, '3b', 'closed')], TEAM, OWNER), undefined);
  });
});

describe('who may write a decision, and under which key', () => {
  const w = (me: string, state: string, maintainers: string[] = [ANN]): StateWrite => ({
    me,
    myName: me.slice(8),
    owner: OWNER,
    maintainers,
    label: 'owner.test/site',
    author: AUTHOR,
    current: 'open',
    authorMay: MAY,
    noun: 'issue',
    state,
    id: 'x',
  });

  it('lets a maintainer write any state and labels, and refuses everyone else in one sentence', () => {
    checkStateWrite(w(ANN, 'merged'));
    checkLabelWrite(w(ANN, 'open'));
    assert.throws(() => checkStateWrite(w(EVE, 'closed')), {
      message: "Only owner.test/site's owner or maintainers or the issue's author can close it; you are eve.",
    });
    assert.throws(() => checkStateWrite(w(EVE, 'closed', [])), {
      message: "Only owner.test/site's owner or the issue's author can close it; you are eve.",
    });
    assert.throws(() => checkLabelWrite(w(EVE, 'open')), {
      message: "Only owner.test/site's owner or maintainers can label its issues; you are eve.",
    });
    assert.throws(() => checkStateWrite(w(BEN, 'closed')), { code: 'permission-denied' });
  });

  it("refuses the author's reopen over a maintainer's close, naming the maintainers", () => {
    assert.throws(
      () =>
        checkOutcome({
          ...w(AUTHOR, 'open'),
          decisions: [d(ANN, '3a', 'closed')],
          rkey: '3b',
          authorName: 'author.test',
        }),
      { message: 'A maintainer of owner.test/site closed x; only its owner or maintainers can reopen it.' },
    );
  });

  it("keys a team member's decision after the team's latest when that is ahead of the clock", () => {
    const now = newTid();
    const ahead = tidAfter(tidAfter(now)!)!;
    const key = decisionKey(now, [d(ANN, ahead, 'closed')], TEAM, OWNER);
    assert.ok(isTid(key) && key > ahead, `${key} after ${ahead}`);
    assert.equal(tidMicros(key), tidMicros(ahead)! + 1);
    // Nobody outside the team moves its keys, nor is moved by them.
    assert.equal(decisionKey(now, [d(ANN, ahead, 'closed')], TEAM, AUTHOR), now);
    assert.equal(decisionKey(now, [d(EVE, ahead, 'closed')], TEAM, OWNER), now);
    // A key no TID can follow is refused in one sentence.
    assert.throws(() => decisionKey(now, [d(ANN, 'zzzzzzzzzzzzz', 'closed')], TEAM, OWNER), {
      code: 'permission-denied',
      message: /no later one can follow it; the repository's owner can remove the maintainer who wrote it\.$/,
    });
  });

  it("keeps the team's state and merge on a label change, and knows when a close changes nothing", () => {
    const list = [d(OWNER, '3a', 'merged', { merged: 'b'.repeat(40), ignoredChecks: ['ci: failed'] })];
    assert.deepEqual(labelDecision(list, TEAM, ['x'], 'b'.repeat(40)), {
      state: 'merged',
      extra: { labels: ['x'], merged: 'b'.repeat(40), ignoredChecks: ['ci: failed'] },
    });
    assert.equal(alreadyDecided('closed', [d(ANN, '3a', 'closed')], OWNER, 'closed', TEAM), true);
    assert.equal(alreadyDecided('closed', [d(AUTHOR, '3a', 'closed')], OWNER, 'closed', TEAM), false);
  });

  it('reads the maintainers of a table once each, never the owner', () => {
    const listed = [ANN, OWNER, ANN, BEN].map((did) => ({ did, since: '2026-01-01T00:00:00.000Z' }));
    assert.deepEqual(maintainersOf({ maintainers: listed }, OWNER), [ANN, BEN]);
  });

  it('lists each maintainer once, since their first listing, never the owner: the one rule the list and the index show', () => {
    const listed = [
      { did: ANN, since: '2026-01-01T00:00:00.000Z' },
      { did: OWNER, since: '2026-01-02T00:00:00.000Z' },
      { did: BEN, since: '2026-01-03T00:00:00.000Z' },
      { did: ANN, since: '2026-01-04T00:00:00.000Z' },
    ];
    assert.deepEqual(maintainerList({ maintainers: listed }, OWNER), [
      { did: ANN, since: '2026-01-01T00:00:00.000Z' },
      { did: BEN, since: '2026-01-03T00:00:00.000Z' },
    ]);
    assert.deepEqual(maintainerList({ maintainers: [] }, OWNER), []);
  });
});
