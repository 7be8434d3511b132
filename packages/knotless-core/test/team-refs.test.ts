// The rule that computes a repository's refs from its writers' tables (format.md, "Teams"): each
// property the format states, on tables written by hand.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { holdsAgainst, teamRefs, type TeamEntry, type TeamTable } from '../src/records/team-refs.ts';

const OWNER = 'did:plc:owner';
const ANN = 'did:plc:ann';
const BEN = 'did:plc:ben';
const REF = 'refs/heads/main';
const c = (n: number) => n.toString(16).padStart(40, '0');

function table(did: string, entries: Record<string, TeamEntry>): TeamTable {
  return { did, entries: new Map(Object.entries(entries)) };
}

/** Every value a listing shows for `ref`: the repository's and the divergent ones. */
function shown(tables: TeamTable[], ref = REF): (string | undefined)[] {
  const r = teamRefs(OWNER, tables).get(ref);
  return r === undefined ? [] : [r.target, ...(r.divergent ?? []).map((d) => d.target)];
}

describe('the repository refs computed from its writers', () => {
  it("are the owner's alone when no maintainer has written", () => {
    const refs = teamRefs(OWNER, [table(OWNER, { [REF]: { target: c(1), over: [] } })]);
    assert.deepEqual(refs.get(REF), { target: c(1), by: OWNER });
  });

  it("follow a maintainer's push that replaced the owner's value, and a tombstone that did", () => {
    const owner = table(OWNER, {
      [REF]: { target: c(1), over: [] },
      'refs/heads/old': { target: c(5), over: [] },
    });
    const ann = table(ANN, {
      [REF]: { target: c(2), over: [{ did: OWNER, target: c(1) }] },
      'refs/heads/old': { over: [{ did: OWNER, target: c(5) }] },
    });
    const refs = teamRefs(OWNER, [ann, owner]);
    assert.deepEqual(refs.get(REF), { target: c(2), by: ANN });
    assert.deepEqual(refs.get('refs/heads/old'), { by: ANN });
  });

  it('never let two racing writers with divergent values both hold, and show both', () => {
    // Ann wrote c(4) having seen no entry of Ben's; Ben wrote c(3) having seen Ann's earlier c(2).
    const owner = table(OWNER, { [REF]: { target: c(1), over: [] } });
    const benBefore = {
      target: c(3),
      over: [
        { did: OWNER, target: c(1) },
        { did: ANN, target: c(2) },
      ],
    };
    const annRace = {
      target: c(4),
      over: [{ did: OWNER, target: c(1) }, { did: BEN }],
    };
    const ann = table(ANN, { [REF]: annRace });
    const ben = table(BEN, { [REF]: benBefore });
    assert.equal(holdsAgainst(ANN, annRace, [owner, ben], REF), false);
    assert.equal(holdsAgainst(BEN, benBefore, [owner, ann], REF), false);
    const r = teamRefs(OWNER, [owner, ann, ben]).get(REF)!;
    assert.ok(r.divergent !== undefined && r.divergent.length > 0, 'the divergence is shown');
    // The owner's c(1), which both replaced (each descends from it), is not listed again.
    assert.deepEqual(new Set(shown([owner, ann, ben])), new Set([c(4), c(3)]));
  });

  it("show the two values of two racers who both replaced the owner's, the first DID's counting", () => {
    // Ann and Ben each read the other at c(1) and wrote past it: neither replaced the other's value.
    const owner = table(OWNER, { [REF]: { target: c(1), over: [] } });
    const seen = (other: string) => [
      { did: OWNER, target: c(1) },
      { did: other, target: c(1) },
    ];
    const ann = table(ANN, { [REF]: { target: c(2), over: seen(BEN) } });
    const ben = table(BEN, { [REF]: { target: c(3), over: seen(ANN) } });
    for (const order of [
      [owner, ann, ben],
      [ben, owner, ann],
    ])
      assert.deepEqual(teamRefs(OWNER, order).get(REF), {
        target: c(2),
        by: ANN,
        divergent: [{ did: BEN, target: c(3) }],
      });
    // A third writer holding the owner's value, unreplaced by anyone, keeps it standing, the owner's first.
    const cid = 'did:plc:cid';
    const third = table(cid, { [REF]: { target: c(1), over: [{ did: OWNER, target: c(1) }] } });
    assert.deepEqual(teamRefs(OWNER, [owner, ann, ben, third]).get(REF), {
      target: c(1),
      by: OWNER,
      divergent: [
        { did: ANN, target: c(2) },
        { did: BEN, target: c(3) },
      ],
    });
  });

  it('keep an acknowledged value listed when a refused racer dies before withdrawing', () => {
    const owner = table(OWNER, { [REF]: { target: c(1), over: [] } });
    // Ann's c(2) replaced the owner's c(1) and Ben's c(7): acknowledged.
    const annAcked = {
      target: c(2),
      over: [
        { did: OWNER, target: c(1) },
        { did: BEN, target: c(7) },
      ],
    };
    assert.equal(
      holdsAgainst(ANN, annAcked, [owner, table(BEN, { [REF]: { target: c(7), over: [] } })], REF),
      true,
    );
    // Ben, who had read Ann's older c(0), wrote c(8) and died before withdrawing it.
    const benDead = {
      target: c(8),
      over: [
        { did: OWNER, target: c(1) },
        { did: ANN, target: c(0) },
      ],
    };
    const tables = [owner, table(ANN, { [REF]: annAcked }), table(BEN, { [REF]: benDead })];
    assert.ok(shown(tables).includes(c(2)), 'the acknowledged commit is still listed');
    // The next push that contains both ends it.
    const annNext = {
      target: c(9),
      over: [
        { did: OWNER, target: c(1) },
        { did: BEN, target: c(8) },
      ],
    };
    const after = [owner, table(ANN, { [REF]: annNext }), table(BEN, { [REF]: benDead })];
    assert.deepEqual(teamRefs(OWNER, after).get(REF), { target: c(9), by: ANN });
  });

  it("count only the writers an entry names: a value read from one account replaces no other's", () => {
    // Ann read the owner's c(7) but not Ben's table (his PDS was down): her push holds against no
    // value of Ben's, even one equal to what she read.
    const owner = table(OWNER, { [REF]: { target: c(7), over: [] } });
    const ben = table(BEN, { [REF]: { target: c(7), over: [{ did: OWNER, target: c(7) }] } });
    const annEntry = { target: c(2), over: [{ did: OWNER, target: c(7) }] };
    assert.equal(holdsAgainst(ANN, annEntry, [owner], REF), true);
    assert.equal(holdsAgainst(ANN, annEntry, [owner, ben], REF), false);
    const r = teamRefs(OWNER, [owner, table(ANN, { [REF]: annEntry }), ben]).get(REF)!;
    assert.deepEqual(r, { target: c(7), by: OWNER, divergent: [{ did: ANN, target: c(2) }] });
  });

  it('are the same whatever order the tables come in, and prefer the owner among equals', () => {
    const owner = table(OWNER, {
      [REF]: { target: c(1), over: [] },
      'refs/tags/v1': { target: c(6), over: [] },
    });
    const ann = table(ANN, { [REF]: { target: c(2), over: [] }, 'refs/tags/v1': { target: c(6), over: [] } });
    const ben = table(BEN, { [REF]: { target: c(3), over: [] } });
    const a = teamRefs(OWNER, [owner, ann, ben]);
    for (const order of [
      [ben, ann, owner],
      [ann, owner, ben],
      [ben, owner, ann],
    ])
      assert.deepEqual(teamRefs(OWNER, order), a);
    assert.equal(a.get(REF)!.by, OWNER);
    assert.deepEqual(a.get('refs/tags/v1'), { target: c(6), by: OWNER });
    // Without the owner's entry, the maintainer whose DID sorts first.
    assert.equal(teamRefs(OWNER, [ben, ann]).get(REF)!.by, ANN);
  });
});
