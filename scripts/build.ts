// Bundles the two executables into packages/knotless/dist, so that a git command starts in tens of
// milliseconds: one file to load instead of hundreds of modules to resolve and strip of types. The
// libraries they load only sometimes are bundled beside them (dist/vendor), so that an installed
// knotless needs no dependencies at all: a small install that runs on Node 20 as well as 22.
// Then the appview, packages/knotless-serve/dist: one bundle whose only dependency left is
// better-sqlite3 (native code, built by npm on install). And the core library,
// packages/knotless-core/dist: JavaScript and type declarations, one file per source, which Node
// runs when the workspace's sources import knotless-core without the `development` condition.
//
// The bundles read the sources themselves (the `development` condition of knotless-core's exports),
// so they never wait for, or bundle a stale copy of, the library's own build.
import fs from 'node:fs';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { build, type Plugin } from 'esbuild';

const pkg = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'packages', 'knotless');
const servePkg = path.join(pkg, '..', 'knotless-serve');

// Build beside dist/ and swap it in, so that a git command running meanwhile never finds it half gone.
const dist = path.join(pkg, 'dist');
const next = `${dist}.next-${process.pid}`;
const serveDist = path.join(servePkg, 'dist');
const serveNext = `${serveDist}.next-${process.pid}`;
const corePkg = path.join(pkg, '..', 'knotless-core');

/** Libraries imported with import() when a command needs them, each bundled into dist/vendor/<file>. */
const VENDOR: Record<string, string> = {
  '@atproto/syntax': 'syntax.cjs',
  '@atproto/identity': 'identity.cjs',
  // Record validation against the lexicons: loaded by the forge commands (pr, issue) only.
  '@atproto/lexicon': 'lexicon.cjs',
  'proper-lockfile': 'lockfile.cjs',
  // OAuth (PAR, PKCE, DPoP): loaded by `knotless login` and by requests with an OAuth session only.
  '@atproto/oauth-client-node': 'oauth.cjs',
  // Private repositories only (knotless-core/private/libs.ts): packs, ref records, keys.
  'libsodium-wrappers': 'sodium.cjs',
  '@noble/ciphers/chacha.js': 'chacha.cjs',
  'age-encryption': 'age.cjs',
};

/**
 * Modules of ours (paths under packages/) that only re-export a few things of large libraries, each
 * bundled on its own into dist/vendor/<file> with tree shaking, so that only what they name is loaded
 * (see knotless/src/agent/stream-libs.ts).
 */
const VENDOR_PARTS: Record<string, string> = {
  // The event stream's libraries: loaded by `knotless agent` and `knotless runner` only.
  'knotless/src/agent/stream-libs.ts': 'agent-stream.cjs',
  // A getRecord proof's CBOR, CIDs and CAR: loaded by the first verified read of a ref table.
  'knotless-core/src/records/proof-libs.ts': 'proof.cjs',
};

/**
 * Packages whose index only re-exports, but that do not say so (`sideEffects`): told to esbuild, it
 * leaves out what nothing uses (@atproto/sync's firehose runner, @atproto/xrpc-server's express server).
 */
const PURE = /[\\/]node_modules[\\/]@atproto[\\/](sync|xrpc-server|xrpc|common)[\\/]/;

const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * The build's identity, `<version>-<hash of the sources>`: a started agent listens at a socket named
 * after it, so a helper of another build never talks to it (see agent/autostart.ts). The sources'
 * hash, not the time, so that building the same code again keeps a running agent in use.
 */
function buildId(): string {
  const { createHash } = process.getBuiltinModule('node:crypto');
  const hash = createHash('sha256');
  const packages = path.join(pkg, '..');
  for (const name of fs.readdirSync(packages).sort()) {
    if (name === 'knotless-serve' || name === 'knotless-devnet') continue;
    const src = path.join(packages, name, 'src');
    if (!fs.existsSync(src)) continue;
    for (const file of (fs.readdirSync(src, { recursive: true }) as string[]).sort()) {
      const full = path.join(src, file);
      if (!fs.statSync(full).isFile()) continue;
      hash.update(`${name}/${file}\0`).update(fs.readFileSync(full)).update('\0');
    }
  }
  const { version } = JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8')) as {
    version: string;
  };
  return `${version}-${hash.digest('hex').slice(0, 10)}`;
}
const BUILD_ID = buildId();

/**
 * Libraries bundled from their ES module build rather than their CommonJS one: libsodium's ES build
 * is its WebAssembly alone (311 KB), its CommonJS build carries an asm.js copy for engines without
 * WebAssembly as well (908 KB), which Node would read and compile for nothing.
 */
const FROM_ESM = new Set(['libsodium-wrappers']);

/** Replaces @atproto-labs/fetch-node by a stub (see build/no-default-fetch.cjs). */
const noDefaultFetch: Plugin = {
  name: 'no-default-fetch',
  setup(b) {
    b.onResolve({ filter: /^@atproto-labs\/fetch-node$/ }, () => ({
      path: path.join(here, 'build', 'no-default-fetch.cjs'),
    }));
  },
};

/**
 * Points the executables' imports of vendored libraries at their bundles: each becomes a small
 * CommonJS module inside the executable that require()s dist/vendor/<file> when first imported, so
 * it loads without the ES loader and with every named export.
 */
const vendored: Plugin = {
  name: 'vendored',
  setup(b) {
    // Every library of VENDOR: one it missed would be inlined into both executables, and every git
    // command would then read and compile it, used or not.
    const names = Object.keys(VENDOR).map((n) => n.replace(/[/.-]/g, '\\$&'));
    b.onResolve({ filter: new RegExp(`^(${names.join('|')})$`) }, (args) =>
      VENDOR[args.path] === undefined ? undefined : { path: args.path, namespace: 'vendored' },
    );
    b.onResolve({ filter: /-libs\.ts$/ }, (args) => {
      const file = path
        .relative(path.join(pkg, '..'), path.join(args.resolveDir, args.path))
        .split(path.sep)
        .join('/');
      return VENDOR_PARTS[file] === undefined ? undefined : { path: file, namespace: 'vendored' };
    });
    b.onLoad({ filter: /.*/, namespace: 'vendored' }, (args) => {
      const file = JSON.stringify(`./vendor/${VENDOR[args.path] ?? VENDOR_PARTS[args.path]!}`);
      // An ES build's bundle exports its default: the library itself, as its CommonJS build would.
      const lib = FROM_ESM.has(args.path) ? `require(${file}).default` : `require(${file})`;
      return { contents: `module.exports = ${lib};`, loader: 'js' };
    });
    b.onResolve({ filter: /^\.\/vendor\// }, (args) => ({ path: args.path, external: true }));
  },
};

/**
 * libsodium's WebAssembly as a file beside its bundle (dist/vendor/sodium.wasm), taken from the
 * base64 text its module carries, and its module given it (build/sodium-wasm.cjs): see there.
 */
const sodiumWasm: Plugin = {
  name: 'sodium-wasm',
  setup(b) {
    b.onResolve({ filter: /^libsodium$/ }, (args) =>
      (args.pluginData as { real?: boolean } | undefined)?.real === true
        ? undefined
        : { path: path.join(here, 'build', 'sodium-wasm.cjs') },
    );
    b.onResolve({ filter: /^libsodium-embedded$/ }, async (args) => {
      const found = await b.resolve('libsodium', {
        kind: 'import-statement',
        resolveDir: args.resolveDir,
        pluginData: { real: true },
      });
      const source = fs.readFileSync(found.path, 'utf8');
      const texts = [...source.matchAll(/"(AGFzbQ[A-Za-z0-9+/]+=*)"/g)];
      const wasm = texts.length === 1 ? Buffer.from(texts[0]![1]!, 'base64') : Buffer.alloc(0);
      if (!wasm.subarray(0, 4).equals(Buffer.from('\0asm', 'latin1')))
        throw new Error(
          `${found.path} no longer carries one base64 WebAssembly module; see build/sodium-wasm.cjs`,
        );
      fs.mkdirSync(path.join(next, 'vendor'), { recursive: true });
      fs.writeFileSync(path.join(next, 'vendor', 'sodium.wasm'), wasm);
      return { path: found.path };
    });
  },
};

/** One library as a CommonJS bundle for Node 20 and later. */
async function buildVendor(spec: string, file: string): Promise<void> {
  const name = JSON.stringify(spec);
  const contents = FROM_ESM.has(spec)
    ? `export { default } from ${name};`
    : `module.exports = require(${name});`;
  await build({
    stdin: { contents, resolveDir: pkg, loader: 'js' },
    outfile: path.join(next, 'vendor', file),
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    plugins: spec === 'libsodium-wrappers' ? [noDefaultFetch, sodiumWasm] : [noDefaultFetch],
    logLevel: 'error',
  });
}

/** Marks the files of the {@link PURE} packages free of side effects, for tree shaking. */
const pure: Plugin = {
  name: 'pure',
  setup(b) {
    b.onResolve({ filter: /.*/ }, async (args) => {
      if ((args.pluginData as { pure?: boolean } | undefined)?.pure === true) return undefined;
      const found = await b.resolve(args.path, {
        kind: args.kind,
        importer: args.importer,
        resolveDir: args.resolveDir,
        pluginData: { pure: true },
      });
      // Left to esbuild: what does not resolve (an optional require in a try) and other packages.
      if (found.errors.length > 0 || !PURE.test(found.path)) return undefined;
      return { ...found, sideEffects: false };
    });
  },
};

/** One of {@link VENDOR_PARTS}: an ES module of ours, so that esbuild keeps only what it re-exports. */
async function buildVendorPart(source: string, file: string): Promise<void> {
  await build({
    entryPoints: [path.join(pkg, '..', source)],
    outfile: path.join(next, 'vendor', file),
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    plugins: [noDefaultFetch, pure],
    logLevel: 'error',
  });
}

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
    target: 'node20',
    plugins: [vendored],
    conditions: ['development'],
    // The CLI imports no other workspace package but knotless-core: `knotless dev` runs the dev
    // network's own program (knotless-devnet), so nothing of the PDS or the appview is bundled here.
    define: {
      'import.meta.url': '__knotlessUrl',
      // The stub runs the executable (bin/git-remote-knotless.cjs calls its `run`), never itself.
      'import.meta.main': 'false',
      __KNOTLESS_BUILD__: JSON.stringify(BUILD_ID),
    },
    banner: { js: "const __knotlessUrl = require('node:url').pathToFileURL(__filename).href;" },
    logLevel: 'warning',
  });
}

/**
 * The appview as one CommonJS bundle for Node 20 and later, `dist/knotless-serve.cjs`, which the
 * committed stub `bin/knotless-serve.cjs` runs. Its start-up is once per server, so no vendor split:
 * kysely, pg, markdown-it, highlight.js, @atproto/* and the knotless library are all inside.
 */
async function buildServe(): Promise<void> {
  await build({
    // The library's entry (startAppview, defaultConfig… and main, which the bin stub calls): the
    // package's exports point here, so the dev network loads the same bundle users run.
    entryPoints: [path.join(servePkg, 'src', 'index.ts')],
    outfile: path.join(serveNext, 'knotless-serve.cjs'),
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    plugins: [noDefaultFetch],
    conditions: ['development'],
    external: [
      // Native: npm builds it (or fetches a prebuilt binary) for the Node it installs with.
      'better-sqlite3',
      // Optional native speed-ups their libraries load only when installed, never here.
      'pg-native',
      'bufferutil',
      'utf-8-validate',
    ],
    // The bin stub calls main(); `node src/main.ts` is the sources' way in. The bundle sits in dist/
    // as main.ts sits in src/, so its folder stands in for the module's (--version reads ../package.json).
    define: { 'import.meta.main': 'false', 'import.meta.dirname': '__dirname' },
    logLevel: 'warning',
  });
}

/**
 * knotless-core's JavaScript and declarations, compiled by tsc from its sources into its dist/ (see
 * its tsconfig.build.json). Incremental: a build with no change to the library takes about a second.
 */
async function buildCore(): Promise<void> {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const config = path.join(corePkg, 'tsconfig.build.json');
  try {
    await promisify(execFile)(process.execPath, [tsc, '-p', config]);
  } catch (err) {
    // tsc reports type errors on stdout.
    const { stdout } = err as { stdout?: string };
    throw new Error(`knotless-core did not compile:\n${stdout ?? String(err)}`, { cause: err });
  }
}

/**
 * The build's identity for the thin helper in Perl (bin/git-remote-knotless), which finds this build's
 * agent by it as the bundles do by __KNOTLESS_BUILD__.
 */
async function writeBuildId(): Promise<void> {
  await fs.promises.mkdir(next, { recursive: true });
  await fs.promises.writeFile(path.join(next, 'build-id'), `${BUILD_ID}\n`);
}

await Promise.all([
  writeBuildId(),
  buildCore(),
  ...Object.entries(VENDOR).map(([spec, file]) => buildVendor(spec, file)),
  ...Object.entries(VENDOR_PARTS).map(([source, file]) => buildVendorPart(source, file)),
  buildExecutable('knotless'),
  buildExecutable('git-remote-knotless'),
  buildExecutable('git-remote-knotless-thin'),
  buildExecutable('git-spawner'),
  buildServe(),
]);

/** Replaces `dir` by the freshly built `built`. */
function swapIn(built: string, dir: string): void {
  const old = `${dir}.old-${process.pid}`;
  if (fs.existsSync(dir)) fs.renameSync(dir, old);
  fs.renameSync(built, dir);
  fs.rmSync(old, { recursive: true, force: true });
}
swapIn(next, dist);
swapIn(serveNext, serveDist);
