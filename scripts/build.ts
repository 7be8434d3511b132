// Bundles the two executables into packages/knotless/dist, so that a git command starts in tens of
// milliseconds: one file to load instead of hundreds of modules to resolve and strip of types.
// Dynamic imports (commands, the identity resolver, the dev network) become chunks loaded on demand.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const pkg = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'packages', 'knotless');

// Build beside dist/ and swap it in, so that a git command running meanwhile never finds it half gone.
const dist = path.join(pkg, 'dist');
const next = `${dist}.next-${process.pid}`;
await build({
  entryPoints: {
    knotless: path.join(pkg, 'src', 'bin', 'knotless.ts'),
  },
  outdir: next,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node22',
  // The dev network is a large optional package; it is loaded from node_modules when present.
  external: ['knotless-devnet'],
  // Some dependencies are CommonJS and call require(); give the ESM bundle one.
  banner: {
    js: "import { createRequire as __knotlessRequire } from 'node:module'; const require = __knotlessRequire(import.meta.url);",
  },
  chunkNames: 'chunks/[name]-[hash]',
  logLevel: 'warning',
});

// The helper starts for every git command, so it is CommonJS in one file: Node starts a CommonJS
// script about 7 ms sooner than an ES module (no ES loader). Its own code is inlined and evaluated
// lazily where it is imported dynamically.
await build({
  entryPoints: [path.join(pkg, 'src', 'bin', 'git-remote-knotless.ts')],
  outfile: path.join(next, 'git-remote-knotless-main.cjs'),
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node22',
  // Loaded with import() when a command needs them (ES modules, so they must stay dynamic imports).
  external: ['@atproto/*', 'proper-lockfile'],
  define: { 'import.meta.url': '__knotlessUrl' },
  banner: { js: "const __knotlessUrl = require('node:url').pathToFileURL(__filename).href;" },
  logLevel: 'warning',
});

// Node's compile cache keeps V8's code for the bundle between runs (as npm does for itself), so most
// commands skip parsing and compiling it: about 6% fewer instructions before the first request. It
// lives in the user's own knotless cache (as config/env.ts finds it), not in a /tmp shared by all.
const stub = `#!/usr/bin/env node
const { env } = process;
const cache = env.KNOTLESS_CACHE_DIR || \`\${env.XDG_CACHE_HOME || \`\${env.HOME}/.cache\`}/knotless\`;
if (env.HOME || env.KNOTLESS_CACHE_DIR) require('node:module').enableCompileCache?.(\`\${cache}/v8\`);
require('./git-remote-knotless-main.cjs');
`;
fs.writeFileSync(path.join(next, 'git-remote-knotless.cjs'), stub, { mode: 0o755 });

const old = `${dist}.old-${process.pid}`;
if (fs.existsSync(dist)) fs.renameSync(dist, old);
fs.renameSync(next, dist);
fs.rmSync(old, { recursive: true, force: true });
