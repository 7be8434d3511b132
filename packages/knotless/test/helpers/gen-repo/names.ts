// The refs and people of a generated repository. The unusual names come first so that even a small
// repository gets them: they are what exercises the helper's escaping of ref names.

const BRANCH_NAMES = [
  'main',
  'user/ünï/x',
  'weird#name',
  'release@1.0',
  'a+b',
  'feature/a-b',
  'fix/100%-done',
  'emoji/🚀',
  'deps/a,b=c;d',
  'UPPER/Mixed.Case_x',
];
const ANNOTATED_TAG_NAMES = [
  'v1.0.0',
  'v1.0.0-rc.1',
  'ünï/tag',
  'weird#tag',
  'release@2.0',
  'v2.0.0+build.7',
  'emoji-🏷',
];
const LIGHTWEIGHT_TAG_NAMES = [
  'light/ünï',
  'snap#1',
  'a+b-tag',
  // 200 UTF-8 bytes: too long for a readable record key once escaped, so the helper must hash it.
  `long/${'ü'.repeat(100)}`,
  'build@42',
];

/** Commit authors, each with the time zone their dates carry. */
export const AUTHORS = [
  { ident: 'Ada Lovelace <ada@example.com>', tz: '+0000' },
  { ident: 'Jöhn Dœ <john@example.org>', tz: '+0100' },
  { ident: 'Grace Hopper <grace@example.net>', tz: '-0500' },
  { ident: 'Ravi Kumar <ravi@example.in>', tz: '+0530' },
];
/** The committer of every commit and the tagger of every annotated tag. */
export const COMMITTER = 'Knotless Generator <generator@example.com>';

/** Takes `listed` in order, then `fill(i)` for as many more as `count` needs. */
function names(count: number, listed: readonly string[], fill: (i: number) => string): string[] {
  return Array.from({ length: count }, (_, i) => listed[i] ?? fill(i));
}

/** Names for `count` branches, `main` first. */
export function branchNames(count: number): string[] {
  return names(count, BRANCH_NAMES, (i) => `topic/${i}`);
}

/** Names for `count` lightweight tags. */
export function lightweightTagNames(count: number): string[] {
  return names(count, LIGHTWEIGHT_TAG_NAMES, (i) => `build-${i}`);
}

/** Names for `count` annotated tags. */
export function annotatedTagNames(count: number): string[] {
  return names(count, ANNOTATED_TAG_NAMES, (i) => `v0.${Math.floor(i / 10)}.${i % 10}`);
}
