// Broken and hostile data for the hostile cases: packs made by hand, records written straight to
// the PDS with alice's session (the PDS does not validate collections it has no lexicon for).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import zlib from 'node:zlib';
import { refKey } from 'knotless-core/records/ref-key';
import { commitFiles, newRepo } from '../helpers/git.ts';
import { lastLine } from './checks.ts';
import type { FaultEnv } from './env.ts';

/** A pack's JSON form in a record. */
export interface PackJson {
  id: string;
  size: number;
  count: number;
  inline?: { $bytes: string };
  parts?: unknown[];
}

/** Writes a ref record (any value at all) for `ref` of repository `repo`, straight to the PDS. */
export async function putRef(
  env: FaultEnv,
  repo: string,
  ref: string,
  value: Record<string, unknown>,
): Promise<void> {
  await env.pdsPost('com.atproto.repo.putRecord', {
    repo: env.did,
    collection: 'dev.knotless.ref',
    rkey: refKey(repo, ref),
    record: { $type: 'dev.knotless.ref', repo, ref, updatedAt: new Date().toISOString(), ...value },
  });
}

/** An inline pack entry for `bytes`, named by its trailing checksum. */
export function inlinePack(bytes: Buffer, count: number): PackJson {
  return {
    id: bytes.subarray(bytes.length - 20).toString('hex'),
    size: bytes.length,
    count,
    inline: { $bytes: bytes.toString('base64') },
  };
}

/** Appends the SHA-1 trailer that makes `body` a pack git accepts the checksum of. */
export function sealPack(body: Buffer): Buffer {
  return Buffer.concat([body, crypto.createHash('sha1').update(body).digest()]);
}

/** A pack of one blob: its header declares `declared` bytes, its zlib stream holds `content`. */
export function oneBlobPack(content: Buffer, declared = content.length): { pack: Buffer; oid: string } {
  // Type 3 (blob), then the size: 4 bits in the first byte, 7 in each next; the top bit says "more".
  let rest = Math.floor(declared / 16);
  const head = [(rest > 0 ? 0x80 : 0) | (3 << 4) | (declared % 16)];
  while (rest > 0) {
    const more = rest >= 0x80 ? 0x80 : 0;
    head.push((rest % 128) | more);
    rest = Math.floor(rest / 128);
  }
  const header = Buffer.from('PACK\0\0\0\x02\0\0\0\x01', 'latin1');
  const body = Buffer.concat([header, Buffer.from(head), zlib.deflateSync(content, { level: 9 })]);
  const oid = crypto.createHash('sha1').update(`blob ${content.length}\0`).update(content).digest('hex');
  return { pack: sealPack(body), oid };
}

/**
 * A repository pushed the ordinary way: two commits, the second a small edit of a large text file,
 * so its pack is thin (a delta against the first pack). Returns the records of main as stored.
 */
export async function pushedRepo(
  env: FaultEnv,
  prefix: string,
): Promise<{ name: string; url: string; tip: string; packs: PackJson[] }> {
  const { name, url } = await env.repo(prefix);
  const dir = await newRepo(env.alice, url);
  const text = Array.from({ length: 400 }, (_, i) => `line ${i}: the quick brown fox ${i * 7}`).join('\n');
  await commitFiles(env.alice, dir, { 'story.txt': text + '\n' }, 'one');
  await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
  const tip = await commitFiles(env.alice, dir, { 'story.txt': text + '\nthe end\n' }, 'two');
  await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
  const main = await env.getRecord('dev.knotless.ref', refKey(name, 'refs/heads/main'));
  return { name, url, tip, packs: main.value['packs'] as PackJson[] };
}

/** A new repository whose refs are exactly `refs` (HEAD naming main), written straight to the PDS. */
export async function forgedRepo(
  env: FaultEnv,
  prefix: string,
  target: string,
  packs: PackJson[],
): Promise<{ name: string; url: string }> {
  const { name, url } = await env.repo(prefix);
  await putRef(env, name, 'refs/heads/main', { target, packs });
  await putRef(env, name, 'HEAD', { symref: 'refs/heads/main', packs: [] });
  return { name, url };
}

/**
 * Clones `url` into a fresh directory and reports: refused (or not) with one clear knotless
 * sentence matching `says`, no internal error, nothing left on disk, and no hang.
 */
export async function refusedClone(
  env: FaultEnv,
  url: string,
  says: RegExp,
  extra: Record<string, string> = {},
): Promise<string> {
  const out = env.alice.dir();
  const started = Date.now();
  const res = await env.withEnv(extra, () => env.alice.git(out, 'clone', '-q', url, 'c'));
  const ms = Date.now() - started;
  const ours = res.stderr.split('\n').filter((l) => l.startsWith('knotless: '));
  const facts = [res.code !== 0 ? 'refused' : 'cloned'];
  facts.push(
    ours.some((l) => says.test(l)) && !/internal error/.test(res.stderr)
      ? 'clear message'
      : `said: ${lastLine(res.stderr)}`,
  );
  const left = (await import('node:fs')).readdirSync(out);
  facts.push(left.length === 0 ? 'nothing written' : `left ${left.join(', ')}`);
  facts.push(ms < 60_000 ? 'no hang' : `took ${ms} ms`);
  return facts.join('; ');
}

/** The inline bytes of a pack entry. */
export function bytesOf(p: PackJson): Buffer {
  assert.ok(p.inline !== undefined, 'expected an inline pack');
  return Buffer.from(p.inline.$bytes, 'base64');
}
