// The executables' bundles leave the libraries only some commands need to dist/vendor: a library
// inlined by mistake is read and compiled by every git command (the private repositories'
// cryptography once made 785 KB of the helper's 1,050 KB, for public repositories too).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { packageRoot } from '../src/paths.ts';

const dist = path.join(packageRoot(), 'dist');

describe('bundles', () => {
  it('inline none of the private repositories’ libraries, which load from dist/vendor', () => {
    const bundles = fs.readdirSync(dist).filter((f) => f.endsWith('-main.cjs'));
    assert.ok(bundles.length >= 2, `bundles in ${dist}: ${bundles.join(', ')}`);
    for (const file of bundles) {
      const text = fs.readFileSync(path.join(dist, file), 'utf8');
      // esbuild heads each module it inlines with its path.
      assert.doesNotMatch(text, /^\/\/ node_modules\/(libsodium|age-encryption|@noble\/ciphers)/m, file);
    }
    for (const file of ['sodium.cjs', 'sodium.wasm', 'chacha.cjs', 'age.cjs'])
      assert.ok(fs.existsSync(path.join(dist, 'vendor', file)), file);
    // libsodium's WebAssembly as it ships, not base64 text.
    const wasm = fs.readFileSync(path.join(dist, 'vendor', 'sodium.wasm'));
    assert.equal(wasm.subarray(0, 4).toString('latin1'), '\0asm');
  });
});
