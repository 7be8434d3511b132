// Bundles the two executables into packages/knotless/dist, so that a git command starts in tens of
// milliseconds: one file to load instead of hundreds of modules to resolve and strip of types.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const pkg = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'packages', 'knotless');

// Build beside dist/ and swap it in, so that a git command running meanwhile never finds it half gone.
const dist = path.join(pkg, 'dist');
const next = `${dist}.next-${process.pid}`;

/**
 * One executable's bundle, `<name>-main.cjs`, which the committed stub `bin/<name>.cjs` loads after
 * turning on Node's compile cache (see there).
 *
 * CommonJS in one file, because these start for every git command (and every agent's commit): Node
 * starts a CommonJS script about 7 ms sooner than an ES module (no ES loader to set up, no module
 * graph to resolve). Our own code is inlined and evaluated lazily where it is imported dynamically.
 */
async function buildExecutable(name: string): Promise<void> {
  await build({
    entryPoints: [path.join(pkg, 'src', 'bin', `${name}.ts`)],
    outfile: path.join(next, `${name}-main.cjs`),
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node22',
    // ES modules loaded with import() when a command needs them (the identity resolver, the event
    // stream, the dev network): they must stay dynamic imports, which CommonJS can make.
    external: ['@atproto/*', 'proper-lockfile', 'knotless-devnet'],
    define: { 'import.meta.url': '__knotlessUrl' },
    banner: { js: "const __knotlessUrl = require('node:url').pathToFileURL(__filename).href;" },
    logLevel: 'warning',
  });
}

await buildExecutable('knotless');
await buildExecutable('git-remote-knotless');

const old = `${dist}.old-${process.pid}`;
if (fs.existsSync(dist)) fs.renameSync(dist, old);
fs.renameSync(next, dist);
fs.rmSync(old, { recursive: true, force: true });
