// Fuzzes the decoders of what a PDS sends: ref records, repository records and pack bytes. Any input
// either decodes to something that keeps every invariant the helper relies on (valid ref names
// under refs/, object ids, pack sizes that add up; records that round-trip) or is refused with
// `corrupt-remote`, never another exception. `node scripts/fuzz/records.ts [--cases N] [--seed S]`.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import zlib from 'node:zlib';
import { isKnotlessError } from 'knotless-core/errors';
import { checkPackBounds } from 'knotless-core/git/pack-check';
import { isObjectId, isValidRefName } from 'knotless-core/git/refname';
import { MAX_PACKS, parseRefRecord, writeRefRecord } from 'knotless-core/records/ref-record';
import { parseRepoRecord } from 'knotless-core/records/repo-records';
import { main, type Gen } from './gen.ts';

function fail(what: string, input: unknown): never {
  throw new Error(
    `${what}: ${JSON.stringify(input, (_k, v: unknown) => (typeof v === 'string' && v.length > 200 ? `${v.slice(0, 200)}…` : v))}`,
  );
}

/** A valid record to start from: a branch with an inline pack and a blob-stored one, or HEAD. */
function validRecord(g: Gen): Record<string, unknown> {
  if (g.bool(0.2)) return { repo: 'r', ref: 'HEAD', symref: 'refs/heads/main', packs: [], updatedAt: 'now' };
  const inline = crypto.randomBytes(32 + g.int(64));
  return {
    $type: 'dev.knotless.ref',
    repo: 'r',
    ref: `refs/heads/${g.from('abc/-', 8) || 'x'}`,
    target: g.hex(40),
    ...(g.bool(0.3) ? { peeled: g.hex(40) } : {}),
    packs: [
      { id: g.hex(40), size: inline.length, count: g.int(10), inline: { $bytes: inline.toString('base64') } },
      {
        id: g.hex(40),
        size: 100,
        count: 1,
        parts: [
          {
            $type: 'blob',
            ref: { $link: 'bafkrei' + g.from('abcdefghijklmnopqrstuvwxyz234567', 52) },
            mimeType: 'x',
            size: 100,
          },
        ],
      },
    ],
    updatedAt: new Date(0).toISOString(),
  };
}

/** Changes one thing deep inside a value: drops, replaces or adds a field or an element. */
function mutate(g: Gen, value: unknown, depth = 0): unknown {
  if (typeof value !== 'object' || value === null || depth > 4 || g.bool(0.15)) return g.json(2);
  if (Array.isArray(value)) {
    const copy: unknown[] = [...(value as unknown[])];
    if (copy.length > 0 && g.bool(0.7)) {
      const i = g.int(copy.length);
      copy[i] = mutate(g, copy[i], depth + 1);
    } else copy.push(g.json(2));
    return copy;
  }
  const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  const keys = Object.keys(copy);
  const r = g.random();
  if (r < 0.15 && keys.length > 0) delete copy[g.pick(keys)];
  else if (r < 0.3)
    copy[g.pick(['ref', 'symref', 'target', 'repo', 'extra', g.text(5)])] = g.pick([
      'refs/../x',
      'HEAD/..',
      '../../x',
      'refs/heads/a..b',
      g.text(12),
      g.json(1),
    ]);
  else if (keys.length > 0) {
    const k = g.pick(keys);
    copy[k] = mutate(g, copy[k], depth + 1);
  }
  return copy;
}

function checkRecord(input: unknown): void {
  let r;
  try {
    r = parseRefRecord(input);
  } catch (err) {
    if (!isKnotlessError(err, 'corrupt-remote')) fail(`threw ${String(err)}`, input);
    return;
  }
  if (r.ref === 'HEAD') {
    if (r.symref === undefined || !isValidRefName(r.symref)) fail('HEAD names an invalid ref', input);
  } else {
    if (!isValidRefName(r.ref) || !r.ref.startsWith('refs/') || r.ref.split('/').includes('..'))
      fail('accepted a ref name outside refs/', input);
    if (!isObjectId(r.target)) fail('accepted an invalid target', input);
    if (r.peeled !== undefined && !isObjectId(r.peeled)) fail('accepted an invalid peeled id', input);
  }
  if (r.packs.length > MAX_PACKS) fail('accepted too many packs', input);
  for (const p of r.packs) {
    if (!isObjectId(p.id) || !Number.isSafeInteger(p.size) || p.size < 32) fail('accepted a bad pack', input);
    const total = p.inline?.length ?? p.parts?.reduce((n, b) => n + b.size, 0);
    if (total !== p.size) fail('accepted a pack whose bytes do not add up', input);
  }
  const again = parseRefRecord(JSON.parse(JSON.stringify(writeRefRecord(r))));
  try {
    assert.deepStrictEqual(again, r);
  } catch {
    fail('does not round-trip', input);
  }
}

/** A small real pack of one blob, then damaged in one of several ways (or left whole). */
function packBytes(g: Gen): Buffer {
  const content = crypto.randomBytes(g.int(300));
  const head = Buffer.from([0x80 | (3 << 4) | (content.length & 0x0f), content.length >> 4]);
  const body = Buffer.concat([
    Buffer.from('PACK\0\0\0\x02\0\0\0\x01', 'latin1'),
    head,
    zlib.deflateSync(content),
  ]);
  const pack = Buffer.concat([body, crypto.createHash('sha1').update(body).digest()]);
  switch (g.int(6)) {
    case 0:
      return pack;
    case 1:
      return pack.subarray(0, g.int(pack.length));
    case 2: {
      const copy = Buffer.from(pack);
      for (let i = g.int(4) + 1; i > 0; i--) copy[g.int(copy.length)] = g.int(256);
      return copy;
    }
    case 3: {
      const copy = Buffer.from(pack);
      copy.writeUInt32BE(g.pick([0, 2, 1000, 0xffffffff]), 8);
      return copy;
    }
    case 4:
      return Buffer.concat([
        pack.subarray(0, 12),
        crypto.randomBytes(g.int(200)),
        pack.subarray(pack.length - 20),
      ]);
    default:
      return crypto.randomBytes(g.int(100));
  }
}

/** One case; throws when a property fails. */
export function checkRecords(g: Gen): void {
  checkRecord(g.bool(0.8) ? mutate(g, validRecord(g)) : g.json(4));
  const repo = parseRepoRecord(g.bool() ? mutate(g, { createdAt: 'now', description: 'd' }) : g.json(3));
  if (typeof repo.createdAt !== 'string') fail('repo record without a createdAt string', repo);
  const pack = packBytes(g);
  try {
    checkPackBounds(pack, 'f'.repeat(40), 1024 * 1024);
  } catch (err) {
    if (!isKnotlessError(err, 'corrupt-remote'))
      fail(`pack check threw ${String(err)}`, pack.toString('hex'));
  }
}

if (import.meta.main) main('records', checkRecords);
