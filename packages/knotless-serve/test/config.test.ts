// The appview's settings from options and the environment (the time limits), and its log.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import Sqlite from 'better-sqlite3';
import { startAppview } from '../src/appview.ts';
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

describe('appview log', () => {
  it('escapes control characters in every line it writes', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-serve-log-'));
    const lines: string[] = [];
    // A DID with a terminal escape: its backfill fails, and the failure is logged with the DID in it.
    const evil = 'did:plc:\u001b]0;pwned\u0007\u001b[2J\u202eabc';
    const app = await startAppview(
      {
        ...defaultConfig(dir),
        database: ':memory:',
        port: 0,
        plcUrl: 'http://127.0.0.1:9',
        backfillDids: [evil],
        dev: true,
      },
      (line) => lines.push(line),
    );
    try {
      await app.idle();
    } finally {
      await app.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
    const line = lines.find((l) => l.startsWith('backfilling '));
    assert.ok(line !== undefined, lines.join('\n'));
    assert.match(line, /did:plc:\\x1b\]0;pwned\\x07\\x1b\[2J\\u\{202e\}abc/);
    // eslint-disable-next-line no-control-regex
    assert.doesNotMatch(lines.join(''), /[\u0000-\u001f\u007f-\u009f\u202a-\u202e]/);
  });

  it('logs a backfill that fails outside any one account, and still closes', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-serve-backfill-'));
    const database = path.join(dir, 'index.sqlite');
    // A PDS whose account listing waits until the test has broken the index under the appview.
    let asked!: () => void;
    const listed = new Promise<void>((r) => (asked = r));
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const pds = http.createServer((_req, res) => {
      asked();
      void released.then(() =>
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"repos":[]}'),
      );
    });
    await new Promise<void>((r) => pds.listen(0, '127.0.0.1', r));
    const lines: string[] = [];
    const app = await startAppview(
      {
        ...defaultConfig(dir),
        database,
        port: 0,
        plcUrl: 'http://127.0.0.1:9',
        backfillPdses: [`http://127.0.0.1:${(pds.address() as AddressInfo).port}`],
        dev: true,
      },
      (line) => lines.push(line),
    );
    try {
      await listed;
      // The index fails for real: its refs table is gone when the backfill reads it last.
      const other = new Sqlite(database);
      other.exec('DROP TABLE refs');
      other.close();
      release();
      await app.idle();
    } finally {
      await app.close();
      pds.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
    const line = lines.find((l) => l.startsWith('backfill stopped: '));
    assert.ok(line !== undefined, lines.join('\n'));
    assert.match(line, /no such table: refs/);
  });
});
