// `npm run cycles`: fails when the modules of any package's src import each other in a circle,
// type-only imports included (a type cycle is still two layers that each know the other), or when an
// import runs back up the layers docs/architecture.md gives each package (scripts/layers.ts), or
// another package imports a knotless-core subpath the core does not export (scripts/core-exports.ts).
// `--root DIR` checks another checkout (the tests check a copy with an import added).
// madge finds the cycles; it is driven through its API so that a relative import it could not
// resolve (which would hide a cycle) fails the check too.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { exportProblems } from './core-exports.ts';
import { layerViolations, parseLayers } from './layers.ts';

interface MadgeResult {
  circular(): string[][];
  obj(): Record<string, string[]>;
  warnings(): { skipped: string[] };
}
type Madge = (paths: string[], config: Record<string, unknown>) => Promise<MadgeResult>;

/**
 * Cycles allowed to remain, each a `path > path` chain as madge prints it: none. (The appview's were
 * broken by moving RepoTarget into web/site.ts and HttpError into web/http-error.ts.) An entry here
 * passes; any other cycle fails; the check says when an entry is gone.
 */
const KNOWN = new Set<string>([]);

const { values } = parseArgs({ options: { root: { type: 'string' } } });
const root = values.root ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// madge is CommonJS without type declarations: required, and typed by the little used here.
const madge = createRequire(import.meta.url)('madge') as Madge;
const packages = path.join(root, 'packages');
const sources = fs
  .readdirSync(packages)
  .map((p) => path.join(packages, p, 'src'))
  .filter((p) => fs.existsSync(p));

const result = await madge(sources, {
  baseDir: packages,
  fileExtensions: ['ts'],
  tsConfig: path.join(root, 'tsconfig.json'),
  detectiveOptions: { ts: { skipTypeImports: false, skipAsyncImports: false } },
});

let failed = false;
// Bare package names (node_modules, or another workspace package) are outside the graph by design;
// a relative path that could not be resolved is an edge madge could not see.
const unresolved = result.warnings().skipped.filter((s) => s.startsWith('.') || s.startsWith('/'));
for (const s of unresolved) {
  console.error(`cycles: could not resolve the import ${s}`);
  failed = true;
}
const found = result.circular().map((c) => c.join(' > '));
for (const cycle of found) {
  if (KNOWN.has(cycle)) {
    console.log(`known (appview): ${cycle}`);
  } else {
    console.error(`cycle: ${cycle}`);
    failed = true;
  }
}
for (const cycle of KNOWN) {
  if (!found.includes(cycle)) console.log(`gone, delete it from KNOWN in scripts/cycles.ts: ${cycle}`);
}
const layers = parseLayers(fs.readFileSync(path.join(root, 'docs', 'architecture.md'), 'utf8'));
const broken = layerViolations(result.obj(), layers);
for (const problem of broken) {
  console.error(`layers: ${problem}`);
  failed = true;
}
const exportsWrong = exportProblems(root);
for (const problem of exportsWrong) {
  console.error(`exports: ${problem}`);
  failed = true;
}
console.log(
  `${sources.length} packages, ${found.length} cycles (${found.filter((c) => !KNOWN.has(c)).length} new), ${broken.length} imports against the layers, ${exportsWrong.length} against knotless-core's exports`,
);
process.exit(failed ? 1 : 0);
