// The layer check `npm run cycles` runs: the tables of docs/architecture.md read as the rule, and an
// import that runs back up failing the check on a copy of the sources.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { layerViolations, parseLayers } from '../layers.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const doc = fs.readFileSync(path.join(root, 'docs', 'architecture.md'), 'utf8');

/** Runs `npm run cycles`'s script on `dir`; its exit code and output. */
function cycles(dir: string): { code: number | null; out: string } {
  const r = spawnSync(process.execPath, [path.join(root, 'scripts', 'cycles.ts'), '--root', dir], {
    encoding: 'utf8',
  });
  return { code: r.status, out: r.stdout + r.stderr };
}

/**
 * A copy of what the check reads: the doc, the TypeScript configuration, every package's src and the
 * lexicons they import.
 */
function copyTree(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-layers-'));
  fs.mkdirSync(path.join(dir, 'docs'));
  fs.copyFileSync(path.join(root, 'docs', 'architecture.md'), path.join(dir, 'docs', 'architecture.md'));
  fs.copyFileSync(path.join(root, 'tsconfig.json'), path.join(dir, 'tsconfig.json'));
  fs.cpSync(path.join(root, 'lexicons'), path.join(dir, 'lexicons'), { recursive: true });
  for (const pkg of fs.readdirSync(path.join(root, 'packages'))) {
    const src = path.join(root, 'packages', pkg, 'src');
    if (fs.existsSync(src)) fs.cpSync(src, path.join(dir, 'packages', pkg, 'src'), { recursive: true });
  }
  // knotless-core's exports: what the other packages may import of it.
  const corePkg = path.join('packages', 'knotless-core', 'package.json');
  fs.copyFileSync(path.join(root, corePkg), path.join(dir, corePkg));
  return dir;
}

describe('the layers of docs/architecture.md', () => {
  it('gives every package a table, and every unit one layer', () => {
    const layers = parseLayers(doc);
    assert.deepEqual([...layers.keys()].sort(), [
      'knotless',
      'knotless-core',
      'knotless-devnet',
      'knotless-serve',
    ]);
    assert.equal(layers.get('knotless-core')?.get('index.ts'), 1);
    assert.ok(layers.get('knotless-core')!.get('ops/')! < layers.get('knotless-core')!.get('records/')!);
    assert.ok(layers.get('knotless-serve')!.get('web/')! < layers.get('knotless-serve')!.get('net/')!);
    // The appview's ground floor: model/ and net/ under db/, ingest/ and web/.
    const serve = layers.get('knotless-serve')!;
    assert.equal(serve.get('model/'), serve.get('net/'));
    for (const above of ['db/', 'ingest/', 'web/', 'mirror/'])
      assert.ok(serve.get(above)! < serve.get('model/')!, above);
  });

  it('names an import that runs back up, one across a layer, and a folder with no layer', () => {
    const layers = parseLayers(doc);
    const graph = {
      'knotless-core/src/records/name.ts': [
        'knotless-core/src/ops/swap-loop.ts',
        'knotless-core/src/git/run.ts',
      ],
      'knotless/src/helper/main.ts': ['knotless/src/cli/main.ts'],
      'knotless-serve/src/newfolder/x.ts': ['knotless-serve/src/db/open.ts'],
      'knotless-serve/src/model/records.ts': [
        'knotless-serve/src/db/index-store.ts',
        'knotless-serve/src/net/guard.ts',
        'knotless-serve/src/model/packs.ts',
      ],
      'knotless-serve/src/web/server.ts': [
        'knotless-serve/src/web/xrpc/router.ts',
        'knotless-serve/src/net/guard.ts',
      ],
    };
    assert.deepEqual(layerViolations(graph, layers), [
      'knotless-core/src/records/name.ts imports knotless-core/src/ops/swap-loop.ts, which is above it (layer 3 over 6)',
      'knotless-serve/src/model/records.ts imports knotless-serve/src/db/index-store.ts, which is above it (layer 9 over 10)',
      'knotless-serve/src/model/records.ts imports knotless-serve/src/net/guard.ts, another part of its own layer (10)',
      'knotless-serve/src/newfolder/ has no layer in docs/architecture.md: give it its place there',
      'knotless/src/helper/main.ts imports knotless/src/cli/main.ts, another part of its own layer (2)',
    ]);
  });

  it('passes the sources as they are, and fails once an import runs back up', () => {
    const dir = copyTree();
    try {
      const clean = cycles(dir);
      assert.equal(clean.code, 0, clean.out);
      assert.match(clean.out, /0 imports against the layers/);
      const file = path.join(dir, 'packages', 'knotless-core', 'src', 'records', 'name.ts');
      fs.appendFileSync(file, "\nimport '../ops/swap-loop.ts';\n");
      const broken = cycles(dir);
      assert.equal(broken.code, 1, broken.out);
      assert.match(
        broken.out,
        /layers: knotless-core\/src\/records\/name\.ts imports knotless-core\/src\/ops\/swap-loop\.ts, which is above it/,
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('fails on an import of a knotless-core subpath the core does not export, and on the core importing itself by name', () => {
    const dir = copyTree();
    try {
      const clean = cycles(dir);
      assert.equal(clean.code, 0, clean.out);
      assert.match(clean.out, /0 against knotless-core's exports/);
      const exported = Object.keys(
        (
          JSON.parse(fs.readFileSync(path.join(dir, 'packages/knotless-core/package.json'), 'utf8')) as {
            exports: Record<string, unknown>;
          }
        ).exports,
      );
      assert.ok(!exported.includes('./*'), 'every subpath is listed, no pattern');
      // A module only the core itself uses stays private.
      const coreSrc = path.join(dir, 'packages', 'knotless-core', 'src');
      const unexported = fs
        .readdirSync(coreSrc, { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.ts'))
        .map((f) => `./${f.slice(0, -3).split(path.sep).join('/')}`)
        .filter((sub) => !exported.includes(sub))
        .sort();
      const hidden = unexported[0];
      assert.ok(hidden !== undefined, 'some module of the core is private to it');
      fs.appendFileSync(
        path.join(dir, 'packages', 'knotless', 'src', 'paths.ts'),
        `\nexport * from 'knotless-core${hidden.slice(1)}';\n`,
      );
      fs.appendFileSync(
        path.join(dir, 'packages', 'knotless-core', 'src', 'errors.ts'),
        "\nexport type { Config } from 'knotless-core/config/env';\n",
      );
      const broken = cycles(dir);
      assert.equal(broken.code, 1, broken.out);
      assert.match(
        broken.out,
        new RegExp(
          `exports: packages/knotless/src/paths\\.ts imports knotless-core${hidden.slice(1)}, which knotless-core does not export`,
        ),
      );
      assert.match(
        broken.out,
        /exports: packages\/knotless-core\/src\/errors\.ts imports knotless-core\/config\/env by name: the core imports itself relatively/,
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
