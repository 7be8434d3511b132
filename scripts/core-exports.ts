// knotless-core's public surface: the subpaths its package.json exports, listed one by one, so that
// a module no other package imports stays private to the core. `npm run cycles` fails when a
// package, a test, the bench or a script imports a core subpath that is not exported, or when the
// core's own tests import the core by name instead of relatively (which would force an export for a
// test's sake). TypeScript (nodenext) and esbuild refuse such an import too; this says which one
// and what to do, before a typecheck or a build does.
import fs from 'node:fs';
import path from 'node:path';

/** Where imports of knotless-core by name are looked for, relative to the repository's root. */
const IMPORTERS = [
  'packages/knotless/src',
  'packages/knotless/test',
  'packages/knotless-serve/src',
  'packages/knotless-serve/test',
  'packages/knotless-devnet/src',
  'packages/knotless-devnet/test',
  'bench',
  'scripts',
];

const IMPORT = /(?:from\s+|import\(\s*|resolve\(\s*)'knotless-core(\/[A-Za-z0-9/._-]+)?'/g;

function tsFiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { withFileTypes: true, recursive: true })
    .flatMap((e) =>
      e.isFile() && e.name.endsWith('.ts') && !e.parentPath.split(path.sep).includes('node_modules')
        ? [path.join(e.parentPath, e.name)]
        : [],
    );
}

/** Each core specifier (`.` or `./sub/path`) imported by name, with the files importing it. */
export function coreImports(root: string, dirs: readonly string[] = IMPORTERS): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const dir of dirs)
    for (const file of tsFiles(path.join(root, dir)))
      for (const m of fs.readFileSync(file, 'utf8').matchAll(IMPORT)) {
        const sub = m[1] === undefined ? '.' : `.${m[1]}`;
        found.set(sub, [...(found.get(sub) ?? []), path.relative(root, file)]);
      }
  return found;
}

/** The problems with knotless-core's exports in the checkout at `root`, one sentence each. */
export function exportProblems(root: string): string[] {
  const pkgFile = path.join(root, 'packages/knotless-core/package.json');
  const exportsField = (JSON.parse(fs.readFileSync(pkgFile, 'utf8')) as { exports: Record<string, unknown> })
    .exports;
  const problems: string[] = [];
  for (const key of Object.keys(exportsField))
    if (key.includes('*'))
      problems.push(`knotless-core exports a pattern (${key}): list each subpath instead`);
  for (const [sub, files] of coreImports(root))
    if (!(sub in exportsField))
      problems.push(
        `${files[0]!} imports knotless-core${sub.slice(1)}, which knotless-core does not export: add "${sub}" to the exports of packages/knotless-core/package.json, or import what it exports`,
      );
  for (const [sub, files] of coreImports(root, ['packages/knotless-core/src', 'packages/knotless-core/test']))
    problems.push(
      `${files[0]!} imports knotless-core${sub.slice(1)} by name: the core imports itself relatively`,
    );
  return problems;
}
