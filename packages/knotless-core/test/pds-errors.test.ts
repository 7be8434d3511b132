import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorCodes, KnotlessError } from '../src/errors.ts';
import { XrpcError, generalFailure } from '../src/xrpc/client.ts';
import { NoAnswer, unreachable } from '../src/xrpc/no-answer.ts';
import { isAuthRejection, missingScope, pdsRefusal, type XrpcAnswer } from '../src/xrpc/pds-errors.ts';

const answer = (status: number, error: string, message = ''): XrpcAnswer => ({ status, error, message });

describe('PDS refusals, classified by their XRPC error name', () => {
  it('reads the names the reference PDS sends', () => {
    const cases: Array<[XrpcAnswer, ReturnType<typeof pdsRefusal>]> = [
      [answer(400, 'InvalidSwap', 'Record was at bafyold'), 'swap-conflict'],
      [answer(400, 'RecordNotFound', 'Could not locate record'), 'record-missing'],
      [answer(400, 'BlobNotFound', 'Could not find blob: bafkrei'), 'blob-missing'],
      [answer(400, 'ExpiredToken', 'Token has expired'), 'token-rejected'],
      [answer(400, 'InvalidToken', 'Malformed token'), 'token-rejected'],
      [answer(401, 'AuthMissing', 'Authentication Required'), 'not-permitted'],
      [answer(401, 'AuthenticationRequired', 'Authentication Required'), 'not-permitted'],
      [answer(403, 'Forbidden', 'no'), 'not-permitted'],
      [answer(413, 'PayloadTooLarge', 'request entity too large'), 'too-large'],
      [answer(429, 'RateLimitExceeded', 'Rate Limit Exceeded'), 'rate-limited'],
      [answer(404, 'NotFound', ''), 'not-found'],
      [answer(400, 'RepoDeactivated', 'Repo has been deactivated: did:plc:x'), 'account-gone'],
      [answer(400, 'RepoTakendown', 'Repo has been takendown: did:plc:x'), 'account-gone'],
      [answer(400, 'RepoNotFound', 'Could not find repo for DID: did:plc:x'), 'account-gone'],
      [answer(401, 'AccountDeactivated', 'Account is deactivated'), 'account-gone'],
      [answer(400, 'AccountTakedown', 'Account has been taken down'), 'account-gone'],
    ];
    for (const [a, kind] of cases) assert.equal(pdsRefusal(a), kind, JSON.stringify(a));
  });

  it('decides by the name, not by words in the message', () => {
    // A message that talks of swaps, keys, blobs or auth does not make a generic refusal one of those.
    assert.equal(pdsRefusal(answer(400, 'InvalidRequest', 'cannot swap this')), 'other');
    assert.equal(pdsRefusal(answer(400, 'InvalidRequest', 'the record key has a slur in it')), 'other');
    assert.equal(pdsRefusal(answer(400, 'InvalidRequest', 'Invalid authorization header')), 'other');
    assert.equal(pdsRefusal(answer(400, 'SomethingElse', 'Blob not found')), 'other');
    // And a known name wins whatever the message says.
    assert.equal(pdsRefusal(answer(400, 'InvalidSwap', 'Blob not found')), 'swap-conflict');
  });

  it('matches the three generic InvalidRequest answers of the reference PDS narrowly', () => {
    assert.equal(pdsRefusal(answer(400, 'InvalidRequest', 'Blob not found')), 'blob-missing');
    assert.equal(pdsRefusal(answer(400, 'InvalidRequest', 'Blob not found here, maybe')), 'other');
    assert.equal(pdsRefusal(answer(400, 'InvalidRequest', 'Unacceptable slur in record key')), 'key-refused');
    assert.equal(pdsRefusal(answer(400, 'InvalidRequest', 'Invalid record key: a..b')), 'key-refused');
    assert.equal(
      pdsRefusal(answer(400, 'InvalidRequest', 'Invalid record key for dev.knotless.ref: too long')),
      'key-refused',
    );
    assert.equal(pdsRefusal(answer(400, 'InvalidRequest', 'Invalid record keyring')), 'other');
    // listRecords of an account the PDS does not serve as active (deactivated, moved away, deleted).
    assert.equal(pdsRefusal(answer(400, 'InvalidRequest', 'Could not find repo: did:plc:x')), 'account-gone');
    assert.equal(pdsRefusal(answer(400, 'InvalidRequest', 'I could not find repo: x')), 'other');
  });

  it('falls back on the HTTP status for names it does not know', () => {
    assert.equal(pdsRefusal(answer(401, 'HTTP401')), 'token-rejected');
    assert.equal(pdsRefusal(answer(403, 'HTTP403')), 'not-permitted');
    assert.equal(pdsRefusal(answer(404, 'HTTP404')), 'not-found');
    assert.equal(pdsRefusal(answer(413, 'HTTP413')), 'too-large');
    assert.equal(pdsRefusal(answer(429, 'Slow')), 'rate-limited');
    assert.equal(pdsRefusal(answer(500, 'InternalServerError')), 'server-fault');
    assert.equal(pdsRefusal(answer(503, 'HTTP503')), 'server-fault');
    assert.equal(pdsRefusal(answer(400, 'InvalidRequest', 'Too many writes. Max: 200')), 'other');
    // Names are looked up as data: an inherited property name is no name of the table.
    assert.equal(pdsRefusal(answer(400, 'constructor')), 'other');
  });

  it('renews credentials for refused tokens and any 401, not for other refusals', () => {
    assert.equal(isAuthRejection(answer(400, 'ExpiredToken')), true);
    assert.equal(isAuthRejection(answer(400, 'InvalidToken')), true);
    assert.equal(isAuthRejection(answer(401, 'AuthMissing')), true);
    assert.equal(isAuthRejection(answer(400, 'InvalidSwap')), false);
    assert.equal(isAuthRejection(answer(403, 'Forbidden')), false);
  });

  it('turns each kind into its user error, quoting the PDS escaped', () => {
    const code = (e: XrpcError) => (generalFailure(e, 'writing') as KnotlessError).code;
    assert.equal(code(new XrpcError(429, 'RateLimitExceeded', 'x')), 'rate-limited');
    assert.equal(
      code(new XrpcError(401, 'AuthenticationRequired', 'Authentication Required')),
      'permission-denied',
    );
    assert.equal(code(new XrpcError(400, 'InvalidRequest', 'auth needed')), 'pds-error');
    assert.equal(code(new XrpcError(502, 'UpstreamFailure', 'x')), 'pds-error');
    assert.equal(code(new XrpcError(413, 'PayloadTooLarge', 'request entity too large')), 'too-large');
    const quoted = generalFailure(new XrpcError(400, 'Odd\u001b[2J', 'bad\nline'), 'writing') as Error;
    assert.ok(!quoted.message.includes('\u001b') && !quoted.message.includes('\n'), quoted.message);
  });

  it('reads the missing OAuth scope only from a 403 whose whole message says so', () => {
    const a = (status: number, message: string): XrpcAnswer => ({ status, error: 'Forbidden', message });
    assert.equal(
      missingScope(a(403, 'Missing required scope "repo:dev.knotless.ref?action=create"')),
      'repo:dev.knotless.ref?action=create',
    );
    assert.equal(missingScope(a(400, 'Missing required scope "x"')), undefined);
    assert.equal(missingScope(a(403, 'Oops. Missing required scope "x"')), undefined);
    assert.equal(missingScope(a(403, 'Missing required scope "x" and more')), undefined);
    assert.equal(missingScope(a(403, 'Missing required scope "a\nb"')), undefined);
  });
});

describe("git's reason for a failed ref", () => {
  it('is data the error carries, whatever its sentence says', () => {
    const limited = new KnotlessError(
      'rate-limited',
      'The PDS is rate-limiting writing the refs of a/b until 2026-11-30T10:44:45.791Z; try again then, in 3600 s.',
    );
    assert.equal(limited.reason, 'rate limited');
    assert.equal(
      new KnotlessError('permission-denied', 'Permission denied: anything').reason,
      'permission denied',
    );
    assert.equal(new KnotlessError('usage', 'x', { reason: 'no such object' }).reason, 'no such object');
  });

  it('names the kind of fault for a request that got no usable answer', () => {
    const url = new URL('https://pds.example/xrpc/com.atproto.repo.putRecord');
    const reason = (code: string) => unreachable(new NoAnswer(url, code, { limit: 1000 })).reason;
    assert.equal(reason('ECONNREFUSED'), 'pds unreachable');
    assert.equal(reason('SELF_SIGNED_CERT_IN_CHAIN'), 'untrusted certificate');
    assert.equal(reason('EDEADLINE'), 'pds timed out');
    assert.equal(reason('ETOOLARGE'), 'pds answer unreadable');
    assert.equal(reason('ETRUNCATED'), 'pds answer unreadable');
  });

  it('is short, one line and printable for every kind of error', () => {
    for (const code of ErrorCodes) {
      const { reason } = new KnotlessError(code, 'Some sentence: with (words); of all kinds.');
      assert.match(reason, /^[a-z0-9 ;-]{3,40}$/, code);
    }
  });
});
