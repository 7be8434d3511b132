// The checks and protection rules (format.md, "dev.knotless.check", "dev.knotless.protection"), on
// records written by hand: what a commit shows, whose protection counts, what a merge waits for and
// what a push may do to a protected branch.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  branchRules,
  commitChecks,
  protectionKey,
  pushRefusal,
  repoProtection,
  trustedRunners,
  unmetChecks,
  type BranchRule,
  type ListedCheck,
} from '../src/forge/checks.ts';
import type { BranchProtection, CheckState, ProtectionRecord } from '../src/forge/records.ts';

const ALICE = 'did:plc:alice';
const BOB = 'did:plc:bob';
const CAROL = 'did:plc:carol';
const DAN = 'did:plc:dan';
const REPO = `at://${ALICE}/dev.knotless.repo/site`;
const COMMIT = 'a'.repeat(40);
const OTHER = 'b'.repeat(40);

function check(runner: string, rkey: string, context: string, state: CheckState, over = {}): ListedCheck {
  return {
    runner,
    rkey,
    record: { repo: REPO, commit: COMMIT, context, state, createdAt: '2026-01-01T00:00:00.000Z', ...over },
  };
}

const main: BranchProtection = {
  branch: 'main',
  requiredChecks: ['test', 'lint'],
  trustedRunners: [BOB],
  allowForcePush: false,
  allowDeletion: false,
};

describe("a commit's checks as shown", () => {
  it("keep each runner's latest verdict per context by record key, never by createdAt", () => {
    const shown = commitChecks(
      [
        // The later key wins though its createdAt says it is older.
        check(BOB, '3kaaaaaaaaab2', 'test', 'success', { createdAt: '2020-01-01T00:00:00.000Z' }),
        check(BOB, '3kaaaaaaaaaa2', 'test', 'pending', { createdAt: '2030-01-01T00:00:00.000Z' }),
        check(CAROL, '3kaaaaaaaaaa2', 'test', 'failure'),
      ],
      REPO,
      COMMIT,
      [BOB],
    );
    assert.deepEqual(
      shown.map((c) => [c.context, c.runner, c.state, c.trusted]),
      [
        ['test', BOB, 'success', true],
        ['test', CAROL, 'failure', false],
      ],
    );
  });

  it('leave out other commits and other repositories, and count the owner as trusted', () => {
    const shown = commitChecks(
      [
        check(BOB, '3kaaaaaaaaaa2', 'test', 'success', { commit: OTHER }),
        check(BOB, '3kaaaaaaaaaa3', 'test', 'success', { repo: `at://${CAROL}/dev.knotless.repo/site` }),
        check(ALICE, '3kaaaaaaaaaa4', 'lint', 'success', {
          targetUrl: 'https://ci.example/1',
          description: 'ok',
        }),
      ],
      REPO,
      COMMIT,
      [],
    );
    assert.deepEqual(shown, [
      {
        context: 'lint',
        runner: ALICE,
        state: 'success',
        targetUrl: 'https://ci.example/1',
        description: 'ok',
        rkey: '3kaaaaaaaaaa4',
        trusted: true,
      },
    ]);
  });
});

const AT = '2026-01-01T00:00:00.000Z';
const record: ProtectionRecord = { repo: REPO, branches: [main], createdAt: AT };
/** Bob's record as a maintainer of alice's site: in his account, under the maintainer's key. */
const BOB_KEY = protectionKey('site', ALICE, BOB);

describe('whose protection counts', () => {
  it("is the owner's record, keyed by the repository's name, naming the repository", () => {
    const got = (listed: Parameters<typeof repoProtection>[0], maintainers: string[] = []) =>
      repoProtection(listed, REPO, maintainers).records.map((r) => r.by);
    assert.deepEqual(got([{ did: ALICE, rkey: 'site', record }]), [ALICE]);
    assert.deepEqual(got([{ did: CAROL, rkey: 'site', record }]), []);
    assert.deepEqual(got([{ did: ALICE, rkey: 'blog', record }]), []);
    assert.deepEqual(got([]), []);
  });

  it("and each listed maintainer's, under the key a maintainer's ref table has; nobody else's", () => {
    assert.equal(BOB_KEY, `site~${ALICE}`);
    const bobs = { did: BOB, rkey: BOB_KEY, record };
    const carols = { did: CAROL, rkey: protectionKey('site', ALICE, CAROL), record };
    const got = (listed: Parameters<typeof repoProtection>[0], maintainers: string[]) =>
      repoProtection(listed, REPO, maintainers).records.map((r) => r.by);
    assert.deepEqual(got([bobs, carols, { did: ALICE, rkey: 'site', record }], [BOB]), [ALICE, BOB]);
    // Removed (not listed now): his record stops counting at once.
    assert.deepEqual(got([bobs], []), []);
    // His own repository named site is another key, and protects nothing of alice's.
    assert.deepEqual(got([{ did: BOB, rkey: 'site', record }], [BOB]), []);
  });

  it('skips a record under its key naming another repository, with one warning', () => {
    const warnings: string[] = [];
    const other = { ...record, repo: `at://${ALICE}/dev.knotless.repo/blog` };
    const p = repoProtection(
      [
        { did: ALICE, rkey: 'site', record: other },
        { did: BOB, rkey: BOB_KEY, record: other },
      ],
      REPO,
      [BOB],
      (m) => warnings.push(m),
    );
    assert.deepEqual(p.records, []);
    assert.equal(warnings.length, 2);
    assert.match(warnings[1]!, /did:plc:bob names another repository/);
  });

  it('protects only the branches it names', () => {
    const p = repoProtection([{ did: ALICE, rkey: 'site', record }], REPO, []);
    assert.deepEqual(branchRules(p, 'main'), [{ ...main, by: ALICE }]);
    assert.deepEqual(branchRules(p, 'dev'), []);
    assert.deepEqual(branchRules(undefined, 'main'), []);
  });
});

const owners = (p: BranchProtection): BranchRule[] => [{ ...p, by: ALICE }];

describe("a branch's required checks", () => {
  const unmet = (checks: ListedCheck[], rules: BranchRule[] = owners(main)) => {
    const trusted = [...new Set(rules.flatMap((r) => [r.by, ...r.trustedRunners]))].filter(
      (d) => d !== ALICE,
    );
    return unmetChecks(rules, commitChecks(checks, REPO, COMMIT, trusted), ALICE).map((u) => [
      u.context,
      u.kind,
      u.reason,
    ]);
  };

  it('are each missing with no check, and nothing waits on an unprotected branch', () => {
    assert.deepEqual(unmet([]), [
      ['test', 'missing', 'test: no check by a trusted runner yet'],
      ['lint', 'missing', 'lint: no check by a trusted runner yet'],
    ]);
    assert.deepEqual(unmetChecks([], [], ALICE), []);
  });

  it("are satisfied by a trusted runner's success or the owner's, not by an untrusted runner's", () => {
    assert.deepEqual(
      unmet([
        check(BOB, '3kaaaaaaaaaa2', 'test', 'success'),
        check(CAROL, '3kaaaaaaaaaa2', 'lint', 'success'),
      ]),
      [['lint', 'untrusted', `lint: only checked by runners the owner does not trust (${CAROL})`]],
    );
    assert.deepEqual(
      unmet([
        check(BOB, '3kaaaaaaaaaa2', 'test', 'success'),
        check(ALICE, '3kaaaaaaaaaa2', 'lint', 'success'),
      ]),
      [],
    );
  });

  it('wait on a pending check and refuse a failing one, a trusted failure outweighing a success', () => {
    assert.deepEqual(
      unmet([
        check(BOB, '3kaaaaaaaaaa2', 'test', 'pending'),
        check(BOB, '3kaaaaaaaaaa3', 'lint', 'error'),
        check(ALICE, '3kaaaaaaaaaa3', 'lint', 'success'),
      ]),
      [
        ['test', 'pending', `test: pending (by ${BOB})`],
        ['lint', 'failing', `lint: failing (error by ${BOB})`],
      ],
    );
  });

  it("follow a runner's later verdict: a failure then a success lets the merge through", () => {
    const failed = check(BOB, '3kaaaaaaaaaa2', 'test', 'failure');
    const p = owners({ ...main, requiredChecks: ['test'] });
    assert.deepEqual(unmet([failed], p), [['test', 'failing', `test: failing (failure by ${BOB})`]]);
    assert.deepEqual(unmet([failed, check(BOB, '3kaaaaaaaaaa3', 'test', 'success')], p), []);
  });

  it('name a context with control characters harmlessly', () => {
    const p = owners({ ...main, requiredChecks: ['te\x1b[2Jst'] });
    const [u] = unmetChecks(p, [], ALICE);
    assert.equal(u?.context, 'te\x1b[2Jst');
    assert.ok(!(u?.reason ?? '').includes('\x1b'), 'the reason holds no escape character');
  });
});

describe("a team's requirements", () => {
  // Alice (the owner) requires test, trusting carol; bob (a maintainer) requires test and lint,
  // trusting dan.
  const alices: BranchRule = { ...main, requiredChecks: ['test'], trustedRunners: [CAROL], by: ALICE };
  const bobs: BranchRule = {
    ...main,
    requiredChecks: ['test', 'lint'],
    trustedRunners: [DAN],
    allowForcePush: true,
    allowDeletion: true,
    by: BOB,
  };
  const rules = [alices, bobs];
  const judge = (checks: ListedCheck[]) =>
    unmetChecks(rules, commitChecks(checks, REPO, COMMIT, [CAROL, BOB, DAN]), ALICE).map((u) => [
      u.context,
      u.kind,
      u.by,
      u.reason,
    ]);

  it("each hold on their own: a maintainer's trusted runner never satisfies the owner's requirement", () => {
    assert.deepEqual(
      judge([check(DAN, '3kaaaaaaaaaa2', 'test', 'success'), check(DAN, '3kaaaaaaaaaa2', 'lint', 'success')]),
      [['test', 'untrusted', [ALICE], `test: only checked by runners the owner does not trust (${DAN})`]],
    );
    // Carol's success counts for alice's test, not for bob's: his test waits for his own runners.
    assert.deepEqual(
      judge([
        check(CAROL, '3kaaaaaaaaaa2', 'test', 'success'),
        check(DAN, '3kaaaaaaaaaa2', 'lint', 'success'),
      ]),
      [
        [
          'test',
          'untrusted',
          [BOB],
          `test: only checked by runners ${BOB} does not trust (${CAROL}) (required by ${BOB})`,
        ],
      ],
    );
    // The owner's success counts for every requirement; the maintainer's own for his alone.
    assert.deepEqual(
      judge([
        check(ALICE, '3kaaaaaaaaaa2', 'test', 'success'),
        check(BOB, '3kaaaaaaaaaa2', 'lint', 'success'),
      ]),
      [],
    );
  });

  it('say once what is unmet the same way, naming who required it', () => {
    assert.deepEqual(judge([]), [
      [
        'test',
        'missing',
        [ALICE, BOB],
        `test: no check by a trusted runner yet (required by ${ALICE}, ${BOB})`,
      ],
      ['lint', 'missing', [BOB], `lint: no check by a trusted runner yet (required by ${BOB})`],
    ]);
    // A failure by the owner fails both; a failure by dan fails only bob's.
    assert.deepEqual(
      judge([
        check(CAROL, '3kaaaaaaaaaa2', 'test', 'success'),
        check(DAN, '3kaaaaaaaaaa3', 'test', 'failure'),
        check(BOB, '3kaaaaaaaaaa2', 'lint', 'success'),
      ]),
      [['test', 'failing', [BOB], `test: failing (failure by ${DAN}) (required by ${BOB})`]],
    );
  });

  it("mark trusted every runner some requirement counts, the maintainers' own included", () => {
    const p = repoProtection(
      [
        { did: ALICE, rkey: 'site', record: { ...record, branches: [alices] } },
        { did: BOB, rkey: BOB_KEY, record: { ...record, branches: [bobs] } },
      ],
      REPO,
      [BOB],
    );
    assert.deepEqual(trustedRunners(p, 'main').sort(), [BOB, CAROL, DAN].sort());
    assert.deepEqual(trustedRunners(p, 'dev'), []);
    assert.deepEqual(
      branchRules(p, 'main').map((r) => r.by),
      [ALICE, BOB],
    );
  });
});

describe('a push to a protected branch', () => {
  it('may fast-forward; may not force or delete unless the protection allows it', () => {
    assert.equal(pushRefusal(owners(main), 'fast-forward'), undefined);
    assert.deepEqual(pushRefusal(owners(main), 'force'), {
      reason: 'protected branch: force-push not allowed',
      by: [ALICE],
    });
    assert.deepEqual(pushRefusal(owners(main), 'delete'), {
      reason: 'protected branch: deletion not allowed',
      by: [ALICE],
    });
    const open = owners({ ...main, allowForcePush: true, allowDeletion: true });
    assert.equal(pushRefusal(open, 'force'), undefined);
    assert.equal(pushRefusal(open, 'delete'), undefined);
    assert.equal(pushRefusal([], 'force'), undefined);
  });

  it("is refused when any one record refuses: a maintainer's allowance loosens nothing, his refusal binds", () => {
    const alices: BranchRule = { ...main, by: ALICE };
    const bobsOpen: BranchRule = { ...main, allowForcePush: true, allowDeletion: true, by: BOB };
    assert.deepEqual(pushRefusal([alices, bobsOpen], 'force')?.by, [ALICE]);
    const alicesOpen: BranchRule = { ...bobsOpen, by: ALICE };
    const bobs: BranchRule = { ...main, by: BOB };
    assert.deepEqual(pushRefusal([alicesOpen, bobs], 'delete')?.by, [BOB]);
    assert.equal(pushRefusal([alicesOpen, { ...bobsOpen }], 'force'), undefined);
  });
});
