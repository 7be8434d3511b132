// What the tests of `check list` against accounts that write thousands of checks share: alice's
// protected repository, checks written in bulk straight into an account, and the listing's JSON.
import assert from 'node:assert/strict';
import { newSite, tipOf, writeManyRaw } from './forge.ts';
import type { GitUser } from './git.ts';
import type { TestNet } from './network.ts';

/** `check list --json` as these tests read it. */
export interface CheckListJson {
  commit: string;
  checks: { context: string; state: string; runner: string; trusted: boolean }[];
  unmet?: { context: string; kind: string }[];
  moreUntrusted?: number;
  partlyRead?: { runner: string; runnerDid: string; read: number }[];
}

/** `n` context names: `prefix-0000`, `prefix-0001`, … (zero-padded to `width` digits). */
export function contextNames(prefix: string, n: number, width = 4): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(width, '0')}`);
}

/**
 * alice's repository `site` with its first commit, main protected (requiring `required`, trusting
 * `runners`); returns main's head and the repository's at-uri.
 */
export async function protectedSite(
  t: TestNet,
  alice: GitUser,
  required: readonly string[],
  runners: readonly string[] = [],
): Promise<{ head: string; repo: string }> {
  await newSite(alice, 'alice.test');
  const head = await tipOf(alice, 'knotless://alice.test/site', 'main');
  const protect = await alice.knotless(
    'repo',
    'protect',
    'site',
    'main',
    ...required.flatMap((c) => ['--require-check', c]),
    ...runners.flatMap((r) => ['--runner', r]),
  );
  assert.equal(protect.code, 0, protect.stderr);
  return { head, repo: `at://${t.dids['alice.test']!}/dev.knotless.repo/site` };
}

/** A `success` on `commit` of `repo` for each of `contexts`, written straight into `handle`'s account. */
export function floodChecks(
  t: TestNet,
  handle: string,
  repo: string,
  commit: string,
  contexts: readonly string[],
): Promise<void> {
  const createdAt = new Date().toISOString();
  return writeManyRaw(
    t,
    handle,
    'dev.knotless.check',
    contexts.map((context) => ({ repo, commit, context, state: 'success', createdAt })),
  );
}
