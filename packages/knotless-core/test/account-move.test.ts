import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { accountMove } from '../src/identity/moved.ts';

describe('an account that moved: the PDS a session was made on against the one its DID document names', () => {
  it('names both PDSes by origin when they differ', () => {
    assert.deepEqual(accountMove('https://old.example.com/', 'https://new.example.com:8443/xrpc'), {
      from: 'https://old.example.com',
      to: 'https://new.example.com:8443',
    });
    assert.deepEqual(accountMove('http://localhost:2583', 'http://localhost:2584'), {
      from: 'http://localhost:2583',
      to: 'http://localhost:2584',
    });
  });

  it('is no move when the origins are the same, or where the account lives now is unknown', () => {
    assert.equal(accountMove('https://pds.example.com', 'https://pds.example.com/'), undefined);
    assert.equal(accountMove('https://pds.example.com', 'https://PDS.example.com:443'), undefined);
    assert.equal(accountMove('https://pds.example.com', undefined), undefined);
  });
});
