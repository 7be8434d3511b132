// The appview's settings from options and the environment: the time limits.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defaultConfig } from '../src/config.ts';
import { configFrom } from '../src/main.ts';

describe('appview configuration', () => {
  it('takes the time limits from options, else the environment, else the defaults', () => {
    const d = defaultConfig('/tmp/x');
    const plain = configFrom(['--data', '/tmp/x'], {});
    assert.equal(plain.requestTimeoutMs, d.requestTimeoutMs);
    assert.equal(plain.gitTimeoutMs, d.gitTimeoutMs);
    const env = { KNOTLESS_SERVE_REQUEST_TIMEOUT: '4000', KNOTLESS_SERVE_GIT_TIMEOUT: '9000' };
    const fromEnv = configFrom(['--data', '/tmp/x'], env);
    assert.equal(fromEnv.requestTimeoutMs, 4000);
    assert.equal(fromEnv.gitTimeoutMs, 9000);
    const fromArgs = configFrom(
      ['--data', '/tmp/x', '--request-timeout', '1500', '--git-timeout', '2500'],
      env,
    );
    assert.equal(fromArgs.requestTimeoutMs, 1500);
    assert.equal(fromArgs.gitTimeoutMs, 2500);
  });

  it('refuses a time limit that is not a positive whole number of milliseconds', () => {
    for (const v of ['abc', '0', '-5', '1.5'])
      assert.throws(() => configFrom([`--request-timeout=${v}`], {}), /not a number of milliseconds/, v);
  });
});
