import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
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
});
