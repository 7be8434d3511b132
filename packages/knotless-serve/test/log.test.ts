// The appview's log: levels, the request's fields on every line written for it, and network text
// escaped, as JSON lines (what an operator's pipeline reads) and as text (the dev network, tests).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jsonLog, logFields, textLog, withRequestLog } from '../src/log.ts';

function jsonLines(level: Parameters<typeof jsonLog>[0]) {
  const lines: Record<string, unknown>[] = [];
  const log = jsonLog(level, { write: (s: string) => lines.push(JSON.parse(s) as Record<string, unknown>) });
  return { log, lines };
}

describe('the appview log', () => {
  it('writes JSON lines at the level asked and above, each with its level, time and message', () => {
    const { log, lines } = jsonLines('info');
    log.debug('not written');
    log('a plain line');
    log.warn('a warning', { pds: 'https://pds.example' });
    log.error('an error');
    assert.deepEqual(
      lines.map((l) => [l['level'], l['msg'], l['name']]),
      [
        [30, 'a plain line', 'knotless-serve'],
        [40, 'a warning', 'knotless-serve'],
        [50, 'an error', 'knotless-serve'],
      ],
    );
    assert.equal(lines[1]!['pds'], 'https://pds.example');
    assert.ok(!Number.isNaN(Date.parse(String(lines[0]!['time']))));
    const debug = jsonLines('debug');
    debug.log.debug('written');
    assert.deepEqual(
      debug.lines.map((l) => l['msg']),
      ['written'],
    );
  });

  it("puts the request's fields on every line logged for it, and none on lines outside it", async () => {
    const { log, lines } = jsonLines('info');
    await withRequestLog('GET', '/alice.test/site', async () => {
      log('before the reader is known');
      logFields({ account: 'did:plc:alice' });
      await Promise.resolve();
      logFields({ repo: 'did:plc:alice/site' });
      log('after');
    });
    log('outside');
    assert.match(String(lines[0]!['req']), /^\d+ GET \/alice\.test\/site$/);
    assert.equal(lines[0]!['account'], undefined);
    assert.equal(lines[1]!['req'], lines[0]!['req']);
    assert.equal(lines[1]!['account'], 'did:plc:alice');
    assert.equal(lines[1]!['repo'], 'did:plc:alice/site');
    assert.deepEqual(
      Object.keys(lines[2]!).filter((k) => ['req', 'account', 'repo'].includes(k)),
      [],
    );
  });

  it('keeps two requests apart, and escapes what the network sent', async () => {
    const out: string[] = [];
    const log = textLog('info', (l) => out.push(l));
    await Promise.all([
      withRequestLog('GET', '/a', async () => {
        await Promise.resolve();
        log('in a');
      }),
      withRequestLog('POST', '/b', async () => {
        logFields({ repo: 'x/y' });
        await Promise.resolve();
        log.warn('in b \u001b[31mred');
      }),
    ]);
    assert.match(
      out.find((l) => l.startsWith('in a'))!,
      /^in a req=\d+ GET \/a$/,
    );
    const b = out.find((l) => l.startsWith('warn: in b'))!;
    assert.match(b, / req=\d+ POST \/b repo=x\/y$/);
    assert.ok(!b.includes('\u001b'), b);
    log.debug('dropped');
    assert.equal(out.length, 2);
  });
});
