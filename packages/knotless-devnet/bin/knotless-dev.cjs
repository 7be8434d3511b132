#!/usr/bin/env node
'use strict';
// `knotless dev` runs this program (`knotless-dev`, linked by npm in the workspace). It runs the
// TypeScript sources directly: the dev network is the workspace's, never installed alone, and the
// PDS it starts needs Node 22 anyway (which strips the types).
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `knotless: \`knotless dev\` needs Node 22.18 or later, not ${process.version}; run \`npm start\` in the knotless workspace.\n`,
  );
  process.exit(11);
}
const main = require('node:url').pathToFileURL(`${__dirname}/../src/bin/knotless-dev.ts`).href;
import(main).catch((err) => {
  process.stderr.write(`knotless: \`knotless dev\` could not start: ${String(err && err.stack)}\n`);
  process.exit(70);
});
