import { CACHE_KINDS, cacheUsage, type CacheUsage } from 'knotless-core/cache/usage';
import { safeJson } from 'knotless-core/text/terminal';
import { JSON_OPTION, type Command } from '../command.ts';

/** Bytes as people read them: B, KiB, MiB, GiB with one decimal. */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${v.toFixed(1)} ${units[u]}`;
}

/** What `knotless cache` and `knotless cache clear` print: one line per kind, then the total. */
export function usageLines(usage: CacheUsage, max: number): string[] {
  const what: Record<(typeof CACHE_KINDS)[number], string> = {
    blobs: 'blobs (packs by CID)',
    mirrors: 'mirrors (bare repositories)',
    views: 'views (refs last seen)',
    other: 'other (identities, servers, compiled code)',
  };
  return [
    ...CACHE_KINDS.map(
      (k) =>
        `${formatBytes(usage.kinds[k].bytes).padStart(10)}  ${what[k]}${k === 'other' ? '' : `, ${usage.kinds[k].entries}`}`,
    ),
    `${formatBytes(usage.total).padStart(10)}  total, of at most ${formatBytes(max)} (KNOTLESS_CACHE_MAX)`,
  ];
}

/** The JSON both commands print. */
export function usageJson(dir: string, usage: CacheUsage, max: number): Record<string, unknown> {
  return { dir, max, total: usage.total, kinds: usage.kinds };
}

export const command: Command = {
  name: 'cache',
  args: '',
  summary: "show the size of knotless's cache by kind (`cache clear` empties it)",
  details: [
    'The cache holds what can be fetched or rebuilt again: pack blobs by CID, a bare repository per remote that compaction and `repo commit` work in, and the refs last seen. When it grows past KNOTLESS_CACHE_MAX (default 1 GiB), the least recently used blobs, mirrors and views are removed after each command. Sessions are not in it.',
  ],
  options: { json: JSON_OPTION },
  positionals: { min: 0, max: 0 },
  examples: ['knotless cache', 'knotless cache --json', 'knotless cache clear'],
  run({ ctx, io, args }) {
    const { cacheDir, cacheMaxBytes } = ctx().config;
    const usage = cacheUsage(cacheDir);
    if (args.values['json'] === true) {
      io.out(safeJson(usageJson(cacheDir, usage, cacheMaxBytes)));
      return Promise.resolve();
    }
    io.out(cacheDir);
    for (const line of usageLines(usage, cacheMaxBytes)) io.out(line);
    return Promise.resolve();
  },
};
