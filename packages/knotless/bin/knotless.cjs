#!/usr/bin/env node
'use strict';
// What git and users run. The code is in bundles in ../dist (`npm run build` makes them, and `npm
// install` runs that); this file is committed so that npm links the command on the first install,
// before the bundles exist.
require('./compile-cache.cjs');
const bundle = `${__dirname}/../dist/knotless-main.cjs`;
try {
  require.resolve(bundle);
} catch {
  require('node:fs').writeSync(
    2,
    'knotless: this copy of knotless is not built yet; run `npm run build` in its workspace.\n',
  );
  process.exit(70);
}
require(bundle);
