// A PDS whose answers never end or are far too long: the helper cuts each at its
// cap or time limit, and git ends with one sentence, non-zero, well within the limit.
import path from 'node:path';
import type { FaultRule } from 'knotless-devnet';
import { commitFiles, newRepo } from '../helpers/git.ts';
import { lastLine, noise, type FaultCase } from './checks.ts';
import type { FaultEnv } from './env.ts';

const LIST = 'com.atproto.repo.listRecords';
const BLOB = 'com.atproto.sync.getBlob';
/** What the proxy may send before the helper has cut it: the cap, plus what socket buffers hold. */
const SENT_BOUND = 64 * 1024 * 1024;

/** A pushed repository whose pack is stored in blobs (40 KB of noise is past the inline limit). */
async function blobRepo(env: FaultEnv): Promise<string> {
  const { url } = await env.repo('http');
  const dir = await newRepo(env.alice, url);
  await commitFiles(env.alice, dir, { 'big.bin': noise(40_000, 11) }, 'big');
  await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
  return url;
}

/**
 * Runs a clone (`clone`) or a listing (`ls-remote`) with a fresh cache under `rule`, and reports
 * whether it failed with one sentence matching `sentence` within `maxMs`, and how many bytes a
 * flooding fault got out before it was cut.
 */
function cutOff(
  name: string,
  command: 'clone' | 'ls-remote',
  rule: FaultRule,
  sentence: RegExp,
  maxMs: number,
  extraEnv: Record<string, string> = {},
): FaultCase {
  const flood = rule.fault.kind === 'flood';
  return {
    group: 'pds',
    name,
    expected: `failed; one clear sentence in time${flood ? '; cut off early' : ''}`,
    async run(env) {
      const url = await blobRepo(env);
      let sent: number | undefined;
      const fault =
        rule.fault.kind === 'flood' ? { ...rule.fault, onSent: (n: number) => (sent = n) } : rule.fault;
      env.proxy.inject({ ...rule, fault });
      const out = env.alice.dir();
      const started = Date.now();
      const args = command === 'clone' ? ['clone', '-q', url, 'c'] : ['ls-remote', url];
      const res = await env.withEnv({ KNOTLESS_CACHE_DIR: path.join(out, 'cache'), ...extraEnv }, () =>
        env.alice.git(out, ...args),
      );
      const ms = Date.now() - started;
      const ours = res.stderr.split('\n').filter((l) => l.startsWith('knotless: '));
      const facts = [res.code !== 0 ? 'failed' : `succeeded: ${lastLine(res.stdout)}`];
      facts.push(
        ours.length === 1 && sentence.test(ours[0]!) && ms < maxMs
          ? 'one clear sentence in time'
          : `said ${JSON.stringify(ours.length > 0 ? ours : [lastLine(res.stderr)])} in ${ms} ms`,
      );
      if (flood) {
        // The proxy learns the count when the connection closes, which follows the helper's exit.
        for (let i = 0; i < 50 && sent === undefined; i++) await new Promise((r) => setTimeout(r, 20));
        facts.push(sent !== undefined && sent < SENT_BOUND ? 'cut off early' : `the PDS sent ${sent} bytes`);
      }
      return facts.join('; ');
    },
  };
}

const TOO_LARGE =
  /sent an answer to \S+ larger than the [\d.]+ (MiB|KiB|bytes) allowed for it, so it was cut off/;
const TOO_SLOW = /did not finish its answer to \S+ within 3 s, so it was cut off/;
/**
 * "In time" means before this, a guard against a hang (a 10 GB answer read whole, a trickle never cut)
 * that a loaded machine cannot reach; which limit fired is told by the sentence, not by the clock.
 */
const HANG_MS = 60_000;

/** Every HTTP-bounds case. */
export const HTTP_CASES: FaultCase[] = [
  cutOff(
    'getBlob answers 10 GB with a Content-Length',
    'clone',
    { nsid: BLOB, fault: { kind: 'flood', bytes: 10e9, framing: 'length' } },
    TOO_LARGE,
    HANG_MS,
  ),
  cutOff(
    'getBlob answers 10 GB delimited by the connection closing',
    'clone',
    { nsid: BLOB, fault: { kind: 'flood', bytes: 10e9, framing: 'close' } },
    TOO_LARGE,
    HANG_MS,
  ),
  cutOff(
    'listRecords answers 10 GB chunked',
    'ls-remote',
    { nsid: LIST, fault: { kind: 'flood', bytes: 10e9, framing: 'chunked' } },
    TOO_LARGE,
    HANG_MS,
  ),
  cutOff(
    'listRecords trickles a byte a second and never finishes',
    'ls-remote',
    { nsid: LIST, times: Infinity, fault: { kind: 'trickle', everyMs: 1000 } },
    TOO_SLOW,
    HANG_MS,
    { KNOTLESS_HTTP_TIMEOUT: '3' },
  ),
  cutOff(
    'getBlob trickles a byte every 200 ms and never finishes',
    'clone',
    { nsid: BLOB, times: Infinity, fault: { kind: 'trickle', everyMs: 200, length: 20_000 } },
    TOO_SLOW,
    HANG_MS,
    { KNOTLESS_HTTP_TIMEOUT: '3' },
  ),
];
