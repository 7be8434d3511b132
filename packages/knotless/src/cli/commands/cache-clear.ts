import { clearCache } from 'knotless-core/cache/budget';
import { safeJson } from 'knotless-core/text/terminal';
import { JSON_OPTION, type Command } from '../command.ts';
import { formatBytes, usageJson, usageLines } from './cache.ts';

export const command: Command = {
  name: 'cache clear',
  args: '',
  summary: "empty knotless's cache (blobs, mirrors, views)",
  details: [
    'Removes every pack blob, mirror and view; they are downloaded or rebuilt when next needed. Safe while other knotless commands run: a mirror another command is working in is left, and a blob being read is either read whole or downloaded again. Identities, server limits and sessions are kept.',
  ],
  options: { json: JSON_OPTION },
  positionals: { min: 0, max: 0 },
  async run({ ctx, io, args }) {
    const { cacheDir, cacheMaxBytes } = ctx().config;
    const { freed, kept } = await clearCache(cacheDir);
    if (args.values['json'] === true) {
      io.out(safeJson({ freed, ...usageJson(cacheDir, kept, cacheMaxBytes) }));
      return;
    }
    io.err(`Freed ${formatBytes(freed)}.`);
    for (const line of usageLines(kept, cacheMaxBytes)) io.out(line);
  },
};
