// `knotless dev` without its appview: a missing or broken knotless-serve is one reported line with
// the reason, never an error swallowed on the way.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, describe, it } from 'node:test';
import { loadServe } from '../../knotless-devnet/src/dev/dev.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-dev-appview-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('knotless dev: loading the appview', () => {
  it('loads the workspace appview', async () => {
    const loaded = await loadServe();
    assert.ok('serve' in loaded, JSON.stringify(loaded));
    assert.equal(typeof loaded.serve.startAppview, 'function');
  });

  it('says the appview is not installed when the package is missing', async () => {
    const loaded = await loadServe('knotless-serve-not-a-package');
    assert.deepEqual(loaded, {
      unavailable: 'knotless-serve-not-a-package is not installed beside this knotless',
    });
  });

  it('says why when the appview is there but fails to load', async () => {
    const broken = path.join(dir, 'broken.mjs');
    fs.writeFileSync(broken, "import 'knotless-missing-dependency';\n");
    const loaded = await loadServe(pathToFileURL(broken).href);
    assert.ok('unavailable' in loaded);
    assert.match(loaded.unavailable, /failed to load: Cannot find package 'knotless-missing-dependency'/);
    const throwing = path.join(dir, 'throwing.mjs');
    fs.writeFileSync(throwing, "throw new Error('compiled for another Node');\n");
    const second = await loadServe(pathToFileURL(throwing).href);
    assert.ok('unavailable' in second);
    assert.match(second.unavailable, /failed to load: compiled for another Node$/);
  });
});
