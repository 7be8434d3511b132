#!/usr/bin/env node
'use strict';
// The installed command. The appview is one bundle in ../dist (`npm run build` makes it, and `npm
// install` in the workspace runs that); this file is committed so that npm links the command before
// the bundle exists, and so that a missing build is one sentence rather than a stack trace.
const bundle = `${__dirname}/../dist/knotless-serve.cjs`;
try {
  require.resolve(bundle);
} catch {
  process.stderr.write(
    'knotless-serve: this copy of knotless-serve is not built yet; run `npm run build` in its workspace.\n',
  );
  process.exit(70);
}
void require(bundle).main(process.argv.slice(2));
