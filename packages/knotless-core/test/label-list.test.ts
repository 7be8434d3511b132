import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KnotlessError } from '../src/errors.ts';
import { labelList, parseLabelList } from '../src/forge/decision.ts';

describe('a label list as text, written by both front ends and read back by the web form', () => {
  it('keeps the order, comma-separated, each label made safe by the caller', () => {
    assert.equal(labelList(['bug', 'needs review', 'docs']), 'bug, needs review, docs');
    assert.equal(labelList([]), '');
    assert.equal(
      labelList(['a\u001b[31m', 'b'], (l) => l.replace(/\p{Cc}/gu, '?')),
      'a?[31m, b',
    );
  });

  it('reads a list back: trimmed, empty ones dropped, each once, in order', () => {
    assert.deepEqual(parseLabelList(' bug ,docs,, bug,  ,needs review'), ['bug', 'docs', 'needs review']);
    assert.deepEqual(parseLabelList(''), []);
    const labels = ['wontfix', 'good first issue', 'p1'];
    assert.deepEqual(parseLabelList(labelList(labels)), labels);
  });

  it('keeps a label that holds a comma or a quote whole: written in double quotes, read back as one', () => {
    const labels = ['needs review, urgent', 'docs', '5" screen', ' padded', 'plain'];
    const text = labelList(labels);
    assert.equal(text, '"needs review, urgent", docs, "5"" screen", " padded", plain');
    assert.deepEqual(parseLabelList(text), labels);
    assert.deepEqual(parseLabelList(' "a, b" ,c,"a, b"'), ['a, b', 'c']);
    assert.deepEqual(parseLabelList('x"y, z'), ['x"y', 'z'], 'a quote inside an unquoted label is itself');
  });

  it('refuses a quote left open or text after a closing quote, in one sentence', () => {
    for (const [text, says] of [
      ['"needs review, urgent', /needs its closing double quote/],
      ['"a" b, c', /ends at its closing double quote/],
    ] as const)
      assert.throws(
        () => parseLabelList(text),
        (e: unknown) => e instanceof KnotlessError && e.code === 'usage' && says.test(e.message),
      );
  });
});
