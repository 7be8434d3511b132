// The checks and protection rules (format.md, "dev.knotless.check", "dev.knotless.protection"), on
// records written by hand: what a commit shows, whose protection counts, what a merge waits for and
// what a push may do to a protected branch.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  branchProtection,
  commitChecks,
  pushRefusal,
  repoProtection,
  unmetChecks,
  type ListedCheck,
} from '../src/forge/checks.ts';
import type { BranchProtection, CheckState, ProtectionRecord } from '../src/forge/records.ts';

const ALICE = 'did:plc:alice';
const BOB = 'did:plc:bob';
const CAROL = 'did:plc:carol';
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

describe('whose protection counts', () => {
  const record: ProtectionRecord = { repo: REPO, branches: [main], createdAt: '2026-01-01T00:00:00.000Z' };

  it("is only the owner's record, keyed by the repository's name, naming the repository", () => {
    assert.equal(repoProtection({ did: ALICE, rkey: 'site', record }, REPO), record);
    assert.equal(repoProtection({ did: CAROL, rkey: 'site', record }, REPO), undefined);
    assert.equal(repoProtection({ did: ALICE, rkey: 'blog', record }, REPO), undefined);
    assert.equal(
      repoProtection(
        { did: ALICE, rkey: 'site', record: { ...record, repo: `at://${ALICE}/dev.knotless.repo/blog` } },
        REPO,
      ),
      undefined,
    );
    assert.equal(repoProtection(undefined, REPO), undefined);
  });

  it('protects only the branches it names', () => {
    assert.equal(branchProtection(record, 'main'), main);
    assert.equal(branchProtection(record, 'dev'), undefined);
    assert.equal(branchProtection(undefined, 'main'), undefined);
  });
});

describe("a branch's required checks", () => {
  const unmet = (checks: ListedCheck[], p: BranchProtection | undefined = main) =>
    unmetChecks(p, commitChecks(checks, REPO, COMMIT, p?.trustedRunners ?? [])).map((u) => [
      u.context,
      u.kind,
      u.reason,
    ]);

  it('are each missing with no check, and nothing waits on an unprotected branch', () => {
    assert.deepEqual(unmet([]), [
      ['test', 'missing', 'test: no check by a trusted runner yet'],
      ['lint', 'missing', 'lint: no check by a trusted runner yet'],
    ]);
    assert.deepEqual(unmetChecks(undefined, []), []);
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
    const p = { ...main, requiredChecks: ['test'] };
    assert.deepEqual(unmet([failed], p), [['test', 'failing', `test: failing (failure by ${BOB})`]]);
    assert.deepEqual(unmet([failed, check(BOB, '3kaaaaaaaaaa3', 'test', 'success')], p), []);
  });

  it('name a context with control characters harmlessly', () => {
    const p = { ...main, requiredChecks: ['te\x1b[2Jst'] };
    const [u] = unmetChecks(p, []);
    assert.equal(u?.context, 'te\x1b[2Jst');
    assert.ok(!(u?.reason ?? '').includes('\x1b'), 'the reason holds no escape character');
  });
});

describe('a push to a protected branch', () => {
  it('may fast-forward; may not force or delete unless the protection allows it', () => {
    assert.equal(pushRefusal(main, 'fast-forward'), undefined);
    assert.equal(pushRefusal(main, 'force'), 'protected branch: force-push not allowed');
    assert.equal(pushRefusal(main, 'delete'), 'protected branch: deletion not allowed');
    const open = { ...main, allowForcePush: true, allowDeletion: true };
    assert.equal(pushRefusal(open, 'force'), undefined);
    assert.equal(pushRefusal(open, 'delete'), undefined);
    assert.equal(pushRefusal(undefined, 'force'), undefined);
  });
});
