#!/usr/bin/env node
'use strict';
// What git and users run. The code is in bundles in ../dist (`npm run build` makes them, and `npm
// install` runs that); this file is committed so that npm links the command on the first install,
// before the bundles exist.
require('./compile-cache.cjs');
// The thin helper comes first: with the warm agent running, it forwards git's protocol to it and
// the whole helper (the second bundle) is never loaded (src/bin/git-remote-knotless-thin.ts).
const thin = `${__dirname}/../dist/git-remote-knotless-thin-main.cjs`;
const bundle = `${__dirname}/../dist/git-remote-knotless-main.cjs`;
try {
  require.resolve(thin);
  require.resolve(bundle);
} catch {
  require('node:fs').writeSync(
    2,
    'knotless: this copy of knotless is not built yet; run `npm run build` in its workspace.\n',
  );
  process.exit(70);
}
require(thin).thin((replay) => require(bundle).run(replay));
