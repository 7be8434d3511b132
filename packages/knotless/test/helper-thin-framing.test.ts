import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { packageRoot } from '../src/paths.ts';

// The thin helper in Perl reads and writes the agent's framing by hand (HTTP/1.1 with a chunked body,
// JSON lines): each thin helper here talks to a stand-in agent that answers with what is hard to get
// right (escapes, characters outside the BMP, a lone surrogate, bytes in base64, records cut across
// reads, a character cut across two reads of git's stdin), and both must give git the same bytes.
const HELPER = path.join(packageRoot(), 'bin', 'git-remote-knotless');
const THINS = [
  { name: 'in Perl', env: {} as Record<string, string> },
  { name: 'in Node', env: { KNOTLESS_THIN: 'node' } as Record<string, string> },
];

let dir = '';
let socket = '';
let server: http.Server | undefined;
/** What the stand-in agent was sent of git's stdin by the last session, piece by piece. */
let pieces: string[] = [];
let pieceArrived = (): void => {};
let sessions = 0;

const BYTES = crypto.randomBytes(70_000);
const BIG = 'x'.repeat(200_000) + '\n';
const RECORDS = [
  { o: 'é€😀\u0001\t"\\/ end\n' },
  { e: 'knotless: a sentence with ünïcode\n' },
  { o: '\ud800 lone\n' },
  { b: BYTES.toString('base64') },
  { o: BIG },
];
/** What git must read on the helper's stdout: Node writes a lone surrogate as U+FFFD. */
const STDOUT = Buffer.concat([
  Buffer.from('é€😀\u0001\t"\\/ end\n'),
  Buffer.from('\ufffd lone\n'),
  BYTES,
  Buffer.from(BIG),
]);

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-framing-'));
  fs.mkdirSync(path.join(dir, 'agent'), { mode: 0o700 });
  socket = path.join(dir, 'agent', 'standin.sock');
  server = http.createServer((req, res) => {
    sessions++;
    let buffer = '';
    let session: unknown;
    const lines: unknown[] = [];
    let wake = (): void => {};
    let ended = false;
    req.setEncoding('utf8');
    req.on('data', (text: string) => {
      buffer += text;
      for (let eol; (eol = buffer.indexOf('\n')) !== -1;) {
        lines.push(JSON.parse(buffer.slice(0, eol)));
        buffer = buffer.slice(eol + 1);
      }
      wake();
    });
    req.on('end', () => {
      ended = true;
      wake();
    });
    const next = async (): Promise<unknown> => {
      while (lines.length === 0 && !ended) await new Promise<void>((r) => (wake = r));
      return lines.shift();
    };
    void (async () => {
      session = await next();
      assert.equal(typeof session, 'object');
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.flushHeaders();
      const send = (record: object) => res.write(`${JSON.stringify(record)}\n`);
      for (;;) {
        send({ read: true });
        const piece = (await next()) as { i: string } | undefined;
        if (piece === undefined) break;
        pieces.push(piece.i);
        pieceArrived();
      }
      send({ beat: 1 });
      for (const r of RECORDS) send(r);
      send({ exit: 3 });
      res.end();
    })();
  });
  await new Promise<void>((resolve) => server!.listen(socket, resolve));
});

after(async () => {
  await new Promise((r) => server?.close(r));
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs a thin helper against the stand-in; git's stdin is `list 😀 ok\n`, cut inside the emoji. */
async function session(
  env: Record<string, string>,
): Promise<{ out: Buffer; err: string; code: number | null }> {
  pieces = [];
  const firstPiece = new Promise<void>((r) => (pieceArrived = r));
  const home = fs.mkdtempSync(path.join(dir, 'home-'));
  const helper = spawn(HELPER, ['origin', 'knotless://alice.test/x'], {
    env: {
      PATH: process.env['PATH']!,
      HOME: home,
      KNOTLESS_AGENT_SOCKET: socket,
      KNOTLESS_NODE: process.execPath,
      ...env,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const out: Buffer[] = [];
  let err = '';
  helper.stdout.on('data', (d: Buffer) => out.push(d));
  helper.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const closed = new Promise<number | null>((r) => helper.on('close', r));
  const text = Buffer.from('list 😀 ok\n');
  const cut = text.indexOf(Buffer.from('😀')) + 2;
  helper.stdin.write(text.subarray(0, cut));
  // The first piece reached the agent (without the cut character's first half) before the rest is sent.
  await firstPiece;
  helper.stdin.end(text.subarray(cut));
  const code = await closed;
  return { out: Buffer.concat(out), err, code };
}

describe("the thin helpers' framing", () => {
  for (const thin of THINS)
    it(`the thin helper ${thin.name} forwards git's stdin and writes the agent's records byte for byte`, async () => {
      const before = sessions;
      const got = await session(thin.env);
      assert.equal(sessions - before, 1, 'the stand-in agent took no session');
      assert.equal(got.code, 3, got.err);
      assert.equal(got.err, 'knotless: a sentence with ünïcode\n');
      assert.ok(got.out.equals(STDOUT), `stdout differs: ${got.out.length} bytes, ${STDOUT.length} expected`);
      assert.equal(pieces.join(''), 'list 😀 ok\n');
      assert.ok(!pieces.join('').includes('\ufffd'), JSON.stringify(pieces));
      assert.equal(pieces[0], 'list ');
    });
});
