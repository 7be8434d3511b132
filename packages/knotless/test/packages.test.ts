// The workspace's packages and how they are laid out: each has one job, none imports a package that
// depends on it, and what one package imports of another is its build (JavaScript and declarations),
// with the TypeScript sources only under the `development` condition the workspace runs with.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';

const packages = path.join(import.meta.dirname, '..', '..');

interface Manifest {
  name: string;
  private?: boolean;
  files?: string[];
  types?: string;
  exports?: Record<string, unknown>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

function manifest(dir: string): Manifest {
  return JSON.parse(fs.readFileSync(path.join(packages, dir, 'package.json'), 'utf8')) as Manifest;
}

/** Every workspace package a package names, in any kind of dependency. */
function workspaceDeps(m: Manifest): string[] {
  const all = [m.dependencies, m.devDependencies, m.optionalDependencies, m.peerDependencies];
  return all.flatMap((d) => Object.keys(d ?? {})).filter((n) => n.startsWith('knotless'));
}

/** The bare package names a package's sources import. */
function importedPackages(dir: string): Set<string> {
  const src = path.join(packages, dir, 'src');
  const found = new Set<string>();
  for (const file of fs.readdirSync(src, { recursive: true, encoding: 'utf8' })) {
    if (!file.endsWith('.ts')) continue;
    const text = fs.readFileSync(path.join(src, file), 'utf8');
    for (const m of text.matchAll(/(?:from|import)\s*\(?\s*'(knotless[a-z-]*)(?:\/[^']*)?'/g))
      found.add(m[1]!);
  }
  return found;
}

/** The file an exports entry gives Node when no condition but the defaults is set. */
function defaultTarget(entry: unknown): string | undefined {
  if (typeof entry === 'string') return entry;
  if (typeof entry !== 'object' || entry === null) return undefined;
  for (const [condition, value] of Object.entries(entry)) {
    if (['node', 'import', 'default'].includes(condition)) return defaultTarget(value);
  }
  return undefined;
}

/** npm's own version ranges (semver has no declarations of its own here). */
const semver = createRequire(import.meta.url)('semver') as {
  minVersion(range: string): { version: string } | null;
  satisfies(version: string, range: string): boolean;
};

/** The folder of package `name` as Node finds it from `from`: the nearest node_modules holding it. */
function packageDir(name: string, from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (fs.existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (path.dirname(dir) === dir) throw new Error(`${name} is not installed (from ${from})`);
  }
}

/**
 * Every package a user's install of `dir` brings (dependencies, transitively, and optional ones when
 * installed) whose `engines.node` refuses the oldest Node that `dir` says it runs on: npm warns
 * EBADENGINE for each on that Node.
 */
function enginesRefusing(dir: string): string[] {
  const m = JSON.parse(fs.readFileSync(path.join(packages, dir, 'package.json'), 'utf8')) as {
    engines: { node: string };
  };
  const floor = semver.minVersion(m.engines.node)!.version;
  const seen = new Set<string>();
  const refusing: string[] = [];
  const visit = (from: string, deps: Record<string, string>, optional: Record<string, string>) => {
    for (const name of [...Object.keys(deps), ...Object.keys(optional)]) {
      let at: string;
      try {
        at = packageDir(name, from);
      } catch (err) {
        if (name in optional) continue;
        throw err;
      }
      if (seen.has(at)) continue;
      seen.add(at);
      const dep = JSON.parse(fs.readFileSync(path.join(at, 'package.json'), 'utf8')) as {
        version: string;
        engines?: { node?: string };
        dependencies?: Record<string, string>;
        optionalDependencies?: Record<string, string>;
      };
      const range = dep.engines?.node;
      if (range !== undefined && !semver.satisfies(floor, range))
        refusing.push(`${name}@${dep.version} needs Node ${range}, not ${floor}`);
      visit(at, dep.dependencies ?? {}, dep.optionalDependencies ?? {});
    }
  };
  const own = manifest(dir);
  visit(path.join(packages, dir), own.dependencies ?? {}, own.optionalDependencies ?? {});
  return refusing;
}

describe('the packages', () => {
  it('install on the oldest Node they name: no dependency, however deep, needs a newer one (npm EBADENGINE)', () => {
    assert.deepEqual(enginesRefusing('knotless'), []);
    assert.deepEqual(enginesRefusing('knotless-serve'), []);
  });

  it('depend downwards only: core on none, the appview and the CLI on the core, the dev network on the rest', () => {
    assert.deepEqual(workspaceDeps(manifest('knotless-core')), []);
    assert.deepEqual([...importedPackages('knotless-core')], []);
    assert.deepEqual(workspaceDeps(manifest('knotless')), ['knotless-core']);
    assert.deepEqual([...importedPackages('knotless')], ['knotless-core']);
    assert.deepEqual(workspaceDeps(manifest('knotless-serve')), ['knotless-core']);
    assert.deepEqual([...importedPackages('knotless-serve')], ['knotless-core']);
    assert.deepEqual(workspaceDeps(manifest('knotless-devnet')).sort(), [
      'knotless',
      'knotless-core',
      'knotless-serve',
    ]);
  });

  it('export built JavaScript by default, never TypeScript sources, and ship it', () => {
    for (const dir of ['knotless', 'knotless-core', 'knotless-serve']) {
      const m = manifest(dir);
      for (const [subpath, entry] of Object.entries(m.exports ?? {})) {
        const target = defaultTarget(entry);
        assert.ok(target !== undefined, `${dir} ${subpath} has a default target`);
        assert.doesNotMatch(target, /\.ts$|\/src\//, `${dir} ${subpath}`);
        // npm ships package.json whatever `files` says.
        const shipped =
          target === './package.json' ||
          m.files?.some((f) => target === `./${f}` || target.startsWith(`./${f}/`));
        assert.ok(shipped, `${dir} ships ${target}`);
        if (!target.includes('*'))
          assert.ok(fs.existsSync(path.join(packages, dir, target)), `${dir} ${target} is built`);
      }
    }
  });

  it("knotless-core's build loads on its own and exports what its sources export", async () => {
    const names = async (conditions: string[]): Promise<string> => {
      const { stdout } = await promisify(execFile)(
        process.execPath,
        [
          ...conditions,
          '--input-type=module',
          '-e',
          "console.log(Object.keys(await import('knotless-core')).sort().join(' '))",
        ],
        { cwd: path.join(packages, 'knotless') },
      );
      return stdout.trim();
    };
    const [built, sources] = await Promise.all([names([]), names(['--conditions=development'])]);
    assert.ok(built.split(' ').includes('parseRefRecord'));
    assert.equal(built, sources);
    const resolved = async (conditions: string[]): Promise<string> =>
      (
        await promisify(execFile)(
          process.execPath,
          [
            ...conditions,
            '--input-type=module',
            '-e',
            "console.log(import.meta.resolve('knotless-core/records/ref-key'))",
          ],
          { cwd: path.join(packages, 'knotless') },
        )
      ).stdout.trim();
    assert.match(await resolved([]), /\/knotless-core\/dist\/records\/ref-key\.js$/);
    assert.match(await resolved(['--conditions=development']), /\/knotless-core\/src\/records\/ref-key\.ts$/);
  });

  it('knotless-devnet, private to the workspace, exports its sources and loads them without the development condition', async () => {
    // Never packed or installed: its program and the tests run it on the workspace's Node 22, which
    // strips the types; what it imports of the other packages is their build (see above).
    const m = manifest('knotless-devnet');
    assert.equal(m.private, true);
    assert.equal(m.files, undefined);
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--input-type=module', '-e', "console.log(typeof (await import('knotless-devnet')).startNetwork)"],
      { cwd: path.join(packages, 'knotless') },
    );
    assert.equal(stdout.trim(), 'function');
  });

  it("declares knotless-serve's exports in what it ships, resolvable by a TypeScript consumer without its bundled packages", async () => {
    // knotless-core (private), kysely and the drivers are bundled, not dependencies: a declaration
    // that named them would break a consumer's compile. So: make the declarations as `npm pack` does,
    // take the files npm would ship, and compile a program against only those, strictly, without
    // skipLibCheck and without @types/node.
    const run = promisify(execFile);
    const serve = path.join(packages, 'knotless-serve');
    const tsc = path.join(packages, '..', 'node_modules', 'typescript', 'bin', 'tsc');
    await run(process.execPath, [tsc, '-p', path.join(serve, 'tsconfig.build.json')]);
    const packed = await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: serve });
    const files = (JSON.parse(packed.stdout) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path);
    const m = manifest('knotless-serve');
    assert.ok(m.types !== undefined && files.includes(m.types.slice(2)), `declares types and ships them`);
    const declarations = files.filter((f) => f.endsWith('.d.ts'));
    assert.ok(declarations.length > 0);

    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-consumer-'));
    try {
      const installed = path.join(home, 'node_modules', 'knotless-serve');
      for (const f of [...declarations, 'package.json']) {
        fs.mkdirSync(path.dirname(path.join(installed, f)), { recursive: true });
        fs.copyFileSync(path.join(serve, f), path.join(installed, f));
      }
      fs.writeFileSync(
        path.join(home, 'consumer.ts'),
        `import { configFrom, defaultConfig, main, startAppview, type Appview, type ServeConfig } from 'knotless-serve';
export async function run(): Promise<string> {
  const config: ServeConfig = { ...defaultConfig('/tmp/data'), ...configFrom(['--port', '0'], {}), port: 0 };
  const app: Appview = await startAppview(config, (line: string) => void line);
  await app.idle();
  await app.close();
  await main(['--help']);
  return app.url;
}
`,
      );
      // nodenext reads `exports`; node10, older, reads `types`.
      for (const [module, resolution] of [
        ['nodenext', 'nodenext'],
        ['commonjs', 'node10'],
      ] as const) {
        fs.writeFileSync(
          path.join(home, 'tsconfig.json'),
          JSON.stringify({
            compilerOptions: {
              strict: true,
              module,
              moduleResolution: resolution,
              target: 'es2022',
              lib: ['es2022'],
              types: [],
              skipLibCheck: false,
              noEmit: true,
            },
            files: ['consumer.ts'],
          }),
        );
        const errors = await run(process.execPath, [tsc, '-p', home]).then(
          () => '',
          (err: Error & { stdout?: string }) => err.stdout || err.message,
        );
        assert.equal(errors, '', `${resolution}: the consumer compiles`);
      }
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
    }
  });
});
