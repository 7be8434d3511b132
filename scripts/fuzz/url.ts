// Fuzzes the knotless:// URL parser (packages/knotless-core/src/records/knotless-url.ts): any string either parses to
// a valid owner and repository name or is refused with `invalid-url`/`invalid-name` (never another
// exception), and well-formed URLs round-trip. `node scripts/fuzz/url.ts [--cases N] [--seed S]`.
import { isKnotlessError } from 'knotless-core/errors';
import { parseKnotlessUrl } from '../../packages/knotless-core/src/records/knotless-url.ts';
import { isValidRepoName } from 'knotless-core/records/name';
import { main, type Gen } from './gen.ts';

const OWNER = /^(did:[a-z]+:[A-Za-z0-9._:%-]+|[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*)$/;

function fail(what: string, input: unknown): never {
  throw new Error(`${what}: ${JSON.stringify(input)}`);
}

function owner(g: Gen): string {
  return g.pick([
    () => `${g.from('abcxyz019-', 10) || 'a'}.${g.pick(['test', 'bsky.social', 'example.com'])}`,
    () => `did:plc:${g.from('abcdefghijklmnopqrstuvwxyz234567', 24) || 'x'}`,
    () => `did:web:${g.from('abc.-%3A', 12) || 'x'}`,
    () => g.text(12),
  ])();
}

function repo(g: Gen): string {
  return g.bool(0.7) ? g.from('abcXYZ019._-', 14) : g.text(10);
}

function url(g: Gen): string {
  const r = g.random();
  if (r < 0.7) {
    const tail = g.pick(['', '/', '.git', '.git/', '//', '/x', g.text(3)]);
    const o = g.bool(0.2) ? encodeURIComponent(owner(g)) : owner(g);
    return `${g.pick(['knotless://', 'knotless://', 'knotless:/', 'KNOTLESS://', 'https://'])}${g.bool(0.1) ? '@' : ''}${o}/${repo(g)}${tail}`;
  }
  return g.text(40);
}

/** One case; throws when a property fails. */
export function checkUrl(g: Gen): void {
  const input = url(g);
  let parsed: ReturnType<typeof parseKnotlessUrl>;
  try {
    parsed = parseKnotlessUrl(input);
  } catch (err) {
    if (!isKnotlessError(err, 'invalid-url') && !isKnotlessError(err, 'invalid-name'))
      fail(`threw ${err instanceof Error ? err.name : typeof err} (${String(err)})`, input);
    return;
  }
  if (!isValidRepoName(parsed.repo)) fail('accepted an invalid repository name', input);
  if (!OWNER.test(parsed.owner)) fail('accepted an invalid owner', input);

  // Round trip: a URL built from valid parts parses back to them.
  const o = owner(g);
  const name = repo(g);
  if (!OWNER.test(o) || o.includes('%') || !isValidRepoName(name)) return;
  const back = parseKnotlessUrl(`knotless://${o}/${name}${g.pick(['', '/', '.git'])}`);
  if (back.owner !== o || back.repo !== name) fail('does not round-trip', [o, name]);
}

if (import.meta.main) main('url', checkUrl);
