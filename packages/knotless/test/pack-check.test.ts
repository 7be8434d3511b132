import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { describe, it } from 'node:test';
import { isKnotlessError } from 'knotless-core/errors';
import { checkPackBounds } from 'knotless-core/git/pack-check';
import { oneBlobPack, sealPack } from './faults/hostile-data.ts';

const MiB = 1024 * 1024;
const refused = (pack: Buffer, max: number, why: RegExp) =>
  assert.throws(
    () => checkPackBounds(pack, 'p'.repeat(40), max),
    (err) => isKnotlessError(err, 'corrupt-remote') && why.test(err.message),
  );

/** A real pack with deltas, made by git from two versions of a file. */
function gitPack(): Buffer {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-pack-'));
  const git = (args: string[], input?: string) =>
    spawnSync('git', args, { cwd: dir, input, env: { ...process.env, GIT_DIR: path.join(dir, '.git') } });
  git(['init', '-q']);
  const text = Array.from({ length: 300 }, (_, i) => `line ${i}`).join('\n');
  const oids = [text, `${text}\nmore`].map((t) =>
    git(['hash-object', '-w', '--stdin'], t).stdout.toString().trim(),
  );
  const pack = git(['pack-objects', '--stdout', '-q'], oids.join('\n') + '\n').stdout;
  fs.rmSync(dir, { recursive: true, force: true });
  return pack;
}

/** A pack of a blob and an offset delta on it whose result claims `result` bytes. */
function deltaPack(result: number): Buffer {
  const varint = (n: number) => {
    const out: number[] = [];
    do {
      out.push((n % 128) | (n >= 128 ? 0x80 : 0));
      n = Math.floor(n / 128);
    } while (n > 0);
    return Buffer.from(out);
  };
  const base = Buffer.from('hello');
  const blob = Buffer.concat([Buffer.from([(3 << 4) | base.length]), zlib.deflateSync(base)]);
  const delta = Buffer.concat([varint(base.length), varint(result), Buffer.from([0x91, 0, 5])]);
  const offset = blob.length; // from the delta's start back to the blob's
  const head = Buffer.from([(6 << 4) | delta.length]);
  const ofs = Buffer.concat([head, Buffer.from([offset]), zlib.deflateSync(delta)]);
  return sealPack(Buffer.concat([Buffer.from('PACK\0\0\0\x02\0\0\0\x02', 'latin1'), blob, ofs]));
}

describe('pack bounds', () => {
  it('lets real packs through, deltas included', () => {
    checkPackBounds(gitPack(), 'p'.repeat(40), MiB);
    checkPackBounds(deltaPack(5), 'p'.repeat(40), MiB);
    checkPackBounds(oneBlobPack(Buffer.alloc(0)).pack, 'p'.repeat(40), MiB);
  });

  it('refuses objects and delta results over the limit, and decompression bombs', () => {
    refused(oneBlobPack(Buffer.alloc(10), 2 * MiB).pack, MiB, /would inflate to 2097152 bytes/);
    refused(deltaPack(2 * MiB), MiB, /a delta to 2097152 bytes/);
    refused(oneBlobPack(Buffer.alloc(8 * MiB)).pack, 64 * MiB, /decompression bomb/);
  });

  it('refuses malformed packs: truncated, lying sizes, trailing bytes, not a pack', () => {
    const good = gitPack();
    refused(sealPack(good.subarray(0, good.length - 40)), MiB, /truncated|damaged/);
    refused(oneBlobPack(Buffer.from('hello'), 4).pack, MiB, /damaged or larger than it says/);
    refused(oneBlobPack(Buffer.from('hello'), 9).pack, MiB, /not the size it says/);
    const body = good.subarray(0, good.length - 20);
    refused(sealPack(Buffer.concat([body, Buffer.from('extra')])), MiB, /bytes after its last object/);
    refused(Buffer.alloc(64), MiB, /not a git pack/);
  });
});
