#!/usr/bin/env node
'use strict';
// What git and users run. The code is one bundle in ../dist (`npm run build` makes it, and `npm
// install` runs that); this file is committed so that npm links the command on the first install,
// before the bundle exists. It turns on Node's compile cache in the user's own knotless cache (not a
// /tmp shared by every user): most runs then skip compiling the bundle.
const { env } = process;
const cache = env.KNOTLESS_CACHE_DIR || `${env.XDG_CACHE_HOME || `${env.HOME}/.cache`}/knotless`;
// Compiled code is read from there only when the folder is ours and nobody else can write it (the
// code itself refuses such a folder with a sentence, config/folders.ts in knotless-core).
const ours = (dir) => {
  try {
    const st = require('node:fs').statSync(dir);
    return st.uid === process.getuid?.() && (st.mode & 0o022) === 0;
  } catch (err) {
    return err.code === 'ENOENT';
  }
};
if ((env.HOME || env.KNOTLESS_CACHE_DIR) && ours(cache))
  require('node:module').enableCompileCache?.(`${cache}/v8`);
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
