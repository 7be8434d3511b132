// better-sqlite3 compiled for another Node (npm obeys npm_config_nodedir over the workspace's .npmrc):
// the dev network's start says so in one sentence with a command that rebuilds it for this Node,
// instead of Node's multi-line loader error and a stack. The error below is the one Node 22 threw at
// `npm start` in a clone installed with npm_config_nodedir=/usr (Debian's Node 20 headers).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nativeBuildError } from '../src/network.ts';

function dlopenError(message: string): Error {
  return Object.assign(new Error(message), { code: 'ERR_DLOPEN_FAILED' });
}

describe('a native build for another Node', () => {
  it('is one sentence naming both ABIs and the rebuild that works', () => {
    const err = nativeBuildError(
      dlopenError(
        "The module '/tmp/clone/node_modules/better-sqlite3/build/Release/better_sqlite3.node'\nwas compiled against a different Node.js version using\nNODE_MODULE_VERSION 115. This version of Node.js requires\nNODE_MODULE_VERSION 127. Please try re-compiling or re-installing\nthe module (for instance, using `npm rebuild` or `npm install`).",
      ),
    );
    assert.ok(err !== undefined);
    assert.doesNotMatch(err.message, /\n/);
    assert.match(
      err.message,
      new RegExp(
        `^better-sqlite3, the PDS's SQLite driver, was compiled for another Node \\(NODE_MODULE_VERSION 115; Node ${process.version.replace(/\./g, '\\.')} needs 127\\), .+; in the workspace, run \`npm rebuild better-sqlite3 --nodedir=[^\`]+\`\\.$`,
      ),
    );
  });

  it('leaves every other error alone', () => {
    assert.equal(nativeBuildError(new Error('NODE_MODULE_VERSION 115 NODE_MODULE_VERSION 127')), undefined);
    assert.equal(nativeBuildError(dlopenError('libfoo.so: cannot open shared object file')), undefined);
    assert.equal(nativeBuildError('a string'), undefined);
  });
});
