// Fuzzes the ref-name key encoding (packages/knotless-core/src/records/ref-key.ts): every key uses only
// record-key characters and never `~`, decoding gives the name back, no two names share a key (in one
// repository or across repositories), keys fit in 512 characters, and decoding garbage never throws.
// `node scripts/fuzz/ref-key.ts [--cases N] [--seed S]`.
import { MAX_RECORD_KEY, parseRefName, refKey, writeRefName } from 'knotless-core/records/ref-key';
import { isValidRepoName } from 'knotless-core/records/name';
import { main, type Gen } from './gen.ts';

const KEY_CHARS = /^[A-Za-z0-9._:~-]+$/;

function fail(what: string, input: unknown): never {
  throw new Error(`${what}: ${JSON.stringify(input)}`);
}

/** A ref-like name: mostly refs/… paths, sometimes long, sometimes anything at all. */
function refName(g: Gen): string {
  const r = g.random();
  if (r < 0.6) return `refs/${g.pick(['heads', 'tags', 'notes', g.text(4)])}/${g.text(30)}`;
  if (r < 0.7) return 'refs/heads/' + g.from('ab/_:~.', 600);
  return g.text(40);
}

function repoName(g: Gen): string {
  const name = g.from('abcXYZ019._-', 12) || 'r';
  return isValidRepoName(name) ? name : 'r';
}

/** Keys seen this run, for the injectivity checks (the encoding alone, and the full key). */
const seen = new Map<string, string>();
const keys = new Map<string, string>();

/** One case; throws when a property fails. */
export function checkRefKey(g: Gen): void {
  const name = refName(g);
  const enc = writeRefName(name);
  if (enc.includes('~')) fail('encoding contains ~', name);
  if (enc !== '' && !KEY_CHARS.test(enc)) fail('encoding uses characters keys cannot have', name);
  if (parseRefName(enc) !== name) fail('decoding does not give the name back', name);
  const before = seen.get(enc);
  if (before !== undefined && before !== name) fail('two names share an encoding', [before, name]);
  if (seen.size < 200_000) seen.set(enc, name);

  const repo = repoName(g);
  const key = refKey(repo, name);
  if (key.length > MAX_RECORD_KEY) fail('key longer than 512', [repo, name]);
  if (!key.startsWith(`${repo}~`) || !KEY_CHARS.test(key)) fail('key outside its repository', [repo, name]);
  // The readable key is <repo>~<enc>; the hashed one <repo>~~<32 hex>: encodings never start with ~.
  const rest = key.slice(repo.length + 1);
  if (rest !== enc && !/^~[0-9a-f]{32}$/.test(rest)) fail('key is neither encoded nor hashed', [repo, name]);
  const pair = JSON.stringify([repo, name]);
  const other = keys.get(key);
  if (other !== undefined && other !== pair) fail('two refs share a key', [other, pair]);
  if (keys.size < 200_000) keys.set(key, pair);

  // Garbage in: undefined or a name that encodes back to exactly the input, never an exception.
  const garbage = g.text(20);
  const decoded = parseRefName(garbage);
  if (decoded !== undefined && writeRefName(decoded) !== garbage)
    fail('decoded garbage does not re-encode', garbage);
}

if (import.meta.main) main('ref-key', checkRefKey);
