// What the package exports, for a program that runs the appview in its own process (`knotless dev`
// does) and for the installed command (`main`). Its declarations are published (dist/types, made by
// `npm pack`), while knotless-core, kysely and the drivers are bundled into dist/knotless-serve.cjs,
// not dependencies: so no type declared here may name one of theirs, nor Node's own (@types/node),
// or a TypeScript consumer's compiler could not resolve it. The appview's index and mirror stay
// inside (the tests reach them through src/appview.ts). Test: packages.test.ts, "declares".
import { startAppview as start } from './appview.ts';
import type { ServeConfig } from './config.ts';

export { defaultConfig, type ServeConfig } from './config.ts';
export { configFrom, main } from './main.ts';

/** A running appview, as a program that started it sees it. */
export interface Appview {
  /** Where it listens, e.g. http://127.0.0.1:2583. */
  url: string;
  /** Settles when every mirror sync asked for so far has finished. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts the appview: opens (and migrates) the index, listens for HTTP, follows the event streams
 * from their saved cursors, then backfills the accounts it was given and catches mirrors up. Log
 * lines go to `write` (default: stderr, each prefixed `knotless-serve: `).
 */
export function startAppview(config: ServeConfig, write?: (line: string) => void): Promise<Appview> {
  return start(config, write);
}
