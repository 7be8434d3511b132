'use strict';
// Shared by the two commands' stubs: Node's compile cache in the user's own knotless cache (not a
// /tmp shared by every user), so that most runs skip compiling the bundles. Compiled code is read
// from there only when the folder is ours and nobody else can write it (the code itself refuses such
// a folder with a sentence, config/folders.ts in knotless-core).
const { env } = process;
const cache = env.KNOTLESS_CACHE_DIR || `${env.XDG_CACHE_HOME || `${env.HOME}/.cache`}/knotless`;
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
