// safeText, safeJson and the record checks that keep hostile text off the terminal, without a
// network: what a terminal would be shown for every character that could act on it, and what a ref
// record may not hold.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isKnotlessError } from '../src/errors.ts';
import { parseRefRecord } from '../src/records/ref-record.ts';
import { refsByName, type RemoteRef } from '../src/records/remote-repo.ts';
import { hasUnsafe, internalErrorLines, safeJson, safeLine, safeText } from '../src/text/terminal.ts';

/** Every character a terminal may act on: C0, DEL, C1, the line separators and the bidi controls. */
const UNSAFE_CODES = [
  ...Array.from({ length: 0x20 }, (_, i) => i),
  ...Array.from({ length: 0x21 }, (_, i) => 0x7f + i),
  0x061c,
  0x200e,
  0x200f,
  0x2028,
  0x2029,
  0x202a,
  0x202b,
  0x202c,
  0x202d,
  0x202e,
  0x2066,
  0x2067,
  0x2068,
  0x2069,
];
// eslint-disable-next-line no-control-regex
const RAW = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/u;

const HOSTILE =
  '\u001b[2J\u001b]0;owned\u0007\r\nknotless: verified, all good\u009b31m\u202egnp.exe\u2028\u0000\u007f';

describe('safeText', () => {
  it('shows every unsafe character as a visible escape and leaves the rest alone', () => {
    for (const c of UNSAFE_CODES) {
      const out = safeText(`a${String.fromCodePoint(c)}b`);
      assert.doesNotMatch(out, RAW, `U+${c.toString(16)}`);
      assert.ok(out.startsWith('a\\') && out.endsWith('b'), `U+${c.toString(16)} shown as ${out}`);
    }
    assert.equal(safeText('a\nb\rc\td'), 'a\\nb\\rc\\td');
    assert.equal(safeText('\u001b[31m'), '\\x1b[31m');
    assert.equal(safeText('\u202e'), '\\u{202e}');
    assert.equal(safeText('refs/heads/é-ü-日本-🙂'), 'refs/heads/é-ü-日本-🙂');
  });

  it('cuts long text and replaces lone surrogates', () => {
    assert.equal(safeText('x'.repeat(300)), `${'x'.repeat(200)}…`);
    assert.equal(safeText('a\ud800b'), 'a\ufffdb');
  });

  it('is idempotent: escaped text passes a second time unchanged', () => {
    const once = safeText(HOSTILE);
    assert.doesNotMatch(once, RAW);
    assert.equal(safeLine(once), once);
    assert.equal(safeText(once), once);
  });

  it('hasUnsafe finds exactly what safeText would change', () => {
    for (const c of UNSAFE_CODES) assert.ok(hasUnsafe(`refs/heads/${String.fromCodePoint(c)}`));
    assert.ok(hasUnsafe('a\udc00'));
    assert.ok(!hasUnsafe('refs/heads/日本-🙂'));
  });

  it('keeps a message quoting the network to one line in a bug report', () => {
    const lines = internalErrorLines(new Error(`boom\nknotless: verified, all good\u001b[2J`));
    assert.match(lines[0]!, /^internal error: Error: boom\\nknotless: verified, all good\\x1b\[2J$/);
    for (const l of lines.slice(1)) assert.match(l, /^\s+at /);
  });
});

describe('safeJson', () => {
  it('is valid JSON of the same value with no raw unsafe character', () => {
    for (const c of UNSAFE_CODES) {
      const value = { description: `a${String.fromCodePoint(c)}b`, n: [1, null, 'x'] };
      const out = safeJson(value);
      assert.doesNotMatch(out, RAW, `U+${c.toString(16)}`);
      assert.deepEqual(JSON.parse(out), value);
    }
    const hostile = { name: HOSTILE, lone: 'a\ud800' };
    assert.deepEqual(JSON.parse(safeJson(hostile)), hostile);
    assert.match(safeJson({ d: '\u202e\u0085' }), /^\{"d":"\\u202e\\u0085"\}$/);
  });
});

const TIP = 'a'.repeat(40);
const base = { repo: 'r', ref: 'refs/heads/main', target: TIP, packs: [], updatedAt: '2026-01-01T00:00:00Z' };

function refused(value: unknown, says: RegExp): void {
  assert.throws(
    () => parseRefRecord(value),
    (e) => isKnotlessError(e, 'corrupt-remote') && says.test(e.message) && !RAW.test(e.message),
  );
}

describe('ref record types', () => {
  it('accepts a well-typed record and ignores unknown fields', () => {
    assert.equal(parseRefRecord({ ...base, future: { x: 1 } }).target, TIP);
  });

  it('refuses every field of the wrong type, never reading it as a default', () => {
    refused({ ...base, packs: 'notarray' }, /pack list that is not a list/);
    refused({ ...base, packs: {} }, /pack list that is not a list/);
    refused({ ...base, packs: undefined }, /pack list that is not a list/);
    refused({ ...base, repo: 7 }, /names no repository/);
    refused({ ...base, ref: ['refs/heads/main'] }, /no ref name/);
    refused({ ...base, target: 12 }, /target that is not a string/);
    refused({ ...base, peeled: true }, /peeled that is not a string/);
    refused({ ...base, symref: 1 }, /symref that is not a string/);
    refused({ ...base, symref: 'refs/heads/x' }, /only HEAD may have/);
    refused({ ...base, updatedAt: 5 }, /no updatedAt/);
    refused({ ...base, updatedAt: undefined }, /no updatedAt/);
    refused({ ...base, packs: [{ id: TIP, size: '100', count: 1, inline: { $bytes: '' } }] }, /lacks its id/);
    refused(
      { ...base, packs: [{ id: TIP, size: 100, count: 1, parts: 'x' }] },
      /neither inline bytes nor parts/,
    );
    refused('a string', /not an object/);
    refused([base], /not an object/);
  });

  it('refuses ref names that would act on a terminal, quoting them escaped', () => {
    for (const name of [
      'refs/heads/\u202egnp',
      'refs/heads/a\u009b2J',
      'refs/heads/a\u2028b',
      'refs/heads/\u001b[2J',
    ])
      refused({ ...base, ref: name }, /is not a valid ref name/);
    refused(
      { ...base, ref: 'HEAD', target: undefined, symref: 'refs/heads/\u202ex' },
      /HEAD names no valid ref/,
    );
  });
});

describe('refs claimed by several records', () => {
  const rec = (key: string, ref: string): RemoteRef => ({
    key,
    cid: `cid-${key}`,
    record: { ...base, ref, packs: [] },
  });

  it('sets the ref apart instead of letting the last record win', () => {
    const { byName, contested } = refsByName([
      rec('r~refs_heads_main', 'refs/heads/main'),
      rec('r~refs_heads_dev', 'refs/heads/dev'),
      rec('r~~0123', 'refs/heads/main'),
    ]);
    assert.deepEqual([...byName.keys()], ['refs/heads/dev']);
    assert.deepEqual(
      contested.get('refs/heads/main')?.map((r) => r.key),
      ['r~refs_heads_main', 'r~~0123'],
    );
  });
});
