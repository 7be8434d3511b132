#!/usr/bin/env node
'use strict';
// What git and users run. The code is one bundle in ../dist (`npm run build` makes it, and `npm
// install` runs that); this file is committed so that npm links the command on the first install,
// before the bundle exists. It turns on Node's compile cache in the user's own knotless cache (not a
// /tmp shared by every user): most runs then skip compiling the bundle.
const { env } = process;
const cache = env.KNOTLESS_CACHE_DIR || `${env.XDG_CACHE_HOME || `${env.HOME}/.cache`}/knotless`;
if (env.HOME || env.KNOTLESS_CACHE_DIR) require('node:module').enableCompileCache?.(`${cache}/v8`);
const bundle = `${__dirname}/../dist/git-remote-knotless-main.cjs`;
try {
  require.resolve(bundle);
} catch {
  process.stderr.write(
    'knotless: this copy of knotless is not built yet; run `npm run build` in its workspace.\n',
  );
  process.exit(70);
}
require(bundle);
