import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { isValidRefName } from '../src/git/refname.ts';
import { hashedRefKey, parseRefName, refKey, writeRefName } from '../src/records/ref-key.ts';

/** Record-key syntax (atproto): 1–512 of A-Z a-z 0-9 . - _ : ~, and not "." or "..". */
const RECORD_KEY = /^[A-Za-z0-9._:~-]{1,512}$/;

/** Every character git allows in a ref name: all of Unicode but controls, space and ~^:?*[\ (and DEL). */
function* refCharacters(): Generator<string> {
  for (let cp = 0x21; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    // Every code point of the BMP; beyond it, every 97th, to keep the test fast.
    if (cp > 0xffff && cp % 97 !== 0) continue;
    const ch = String.fromCodePoint(cp);
    if (cp === 0x7f || '~^:?*[\\'.includes(ch)) continue;
    yield ch;
  }
}

describe('ref-name key encoding', () => {
  it('round-trips every character git allows, into valid record keys', () => {
    let n = 0;
    for (const ch of refCharacters()) {
      const ref = `refs/heads/a${ch}b`;
      const encoded = writeRefName(ref);
      assert.ok(RECORD_KEY.test(`repo~${encoded}`), `${JSON.stringify(ch)} → ${encoded}`);
      assert.equal(parseRefName(encoded), ref);
      n++;
    }
    assert.ok(n > 60_000);
  });

  it('is injective: distinct names never share a key', () => {
    const names = [
      'refs/heads/a_b',
      'refs/heads/a/b',
      'refs/heads/a:5Fb',
      'refs/heads/a.b',
      'refs/heads/a-b',
      'refs/heads/A_b',
    ];
    assert.equal(new Set(names.map((n) => refKey('r', n))).size, names.length);
    const all = new Set<string>();
    let n = 0;
    for (const ch of refCharacters()) {
      all.add(writeRefName(`refs/heads/${ch}/x${ch}`));
      n++;
    }
    assert.equal(all.size, n);
  });

  it('keeps readable keys readable and hashes names too long for a key', () => {
    assert.equal(refKey('hello', 'refs/heads/main'), 'hello~refs_heads_main');
    assert.equal(refKey('hello', 'refs/tags/v1.0'), 'hello~refs_tags_v1.0');
    assert.equal(refKey('hello', 'refs/heads/ünï'), 'hello~refs_heads_:C3:BCn:C3:AF');
    const long = `refs/heads/${'ü'.repeat(100)}`;
    const key = refKey('hello', long);
    assert.equal(key, hashedRefKey('hello', long));
    assert.match(key, /^hello~~[0-9a-f]{32}$/);
    assert.ok(RECORD_KEY.test(key));
    assert.ok(RECORD_KEY.test(refKey('x'.repeat(100), `refs/heads/${'y'.repeat(400)}`)));
  });

  it('rejects strings that are not encodings', () => {
    for (const bad of ['a:zz', 'a:2', 'a~b', 'a b', 'a:2f']) assert.equal(parseRefName(bad), undefined, bad);
  });

  it('checks ref names as git check-ref-format does', () => {
    for (const good of [
      'refs/heads/main',
      'refs/tags/v1.0',
      'refs/heads/a+b',
      'refs/heads/ünï/x',
      'refs/heads/@x',
      // git forbids only the whole name "@"; a part "@" is valid, and git pushes it.
      'refs/heads/@',
      'refs/heads/@/x',
    ]) {
      assert.ok(isValidRefName(good), good);
    }
    for (const bad of [
      'HEAD',
      'refs/heads/',
      'refs/heads/a..b',
      'refs/heads/.x',
      'refs/heads/x.lock',
      'refs/heads/a b',
      'refs/heads/a@{1}',
      '../etc/passwd',
      'refs/../x',
      'refs/heads/x.',
      'refs/heads//x',
    ]) {
      assert.ok(!isValidRefName(bad), bad);
    }
  });

  it('agrees with git check-ref-format on names built from awkward parts', () => {
    const parts = [
      'a',
      '@',
      '.',
      '..',
      '.a',
      'a.',
      'a.lock',
      '@{',
      '{',
      'ü',
      '😀',
      '-',
      '#',
      '%',
      "'",
      ';',
      '`',
      '@@',
    ];
    const names = parts.flatMap((p) =>
      parts.flatMap((q) => [`refs/heads/${p}`, `refs/heads/${p}${q}`, `refs/heads/${p}/${q}`]),
    );
    // One git process for all: --stdin would stop at the first invalid name, so each is its own line of a script.
    const script = names
      .map((n) => `git check-ref-format '${n.replaceAll("'", "'\\''")}' && echo 1 || echo 0`)
      .join('\n');
    const verdicts = execFileSync('sh', ['-c', script], { encoding: 'utf8' }).trim().split('\n');
    const differ = names.filter((n, i) => (verdicts[i] === '1') !== isValidRefName(n));
    assert.deepEqual(differ, []);
  });
});
