import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { mentions } from '../src/db/mentions.ts';

describe('a mention in a body or comment', () => {
  it('names the whole handle, at any place, in any case, before a full stop or a comma', () => {
    for (const body of [
      '@bob.test',
      'cc @bob.test',
      'thanks @Bob.Test.',
      '(@bob.test), could you look?',
      'first @bob.testing, then @bob.test',
    ])
      assert.equal(mentions(body, 'bob.test'), true, body);
  });

  it('is not a longer handle, a subdomain of it, or an address that ends in it', () => {
    for (const body of [
      '@bob.testing',
      '@bob.test.example',
      'mail x@bob.test',
      '@bob.test-2',
      'bob.test',
      '',
    ])
      assert.equal(mentions(body, 'bob.test'), false, body);
  });
});
