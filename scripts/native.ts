// `npm install`'s last step in the workspace (its `postinstall`): better-sqlite3, the one native
// module (the PDS's driver and the appview's), must be built for the workspace's Node 22, which runs
// every `npm run` script. npm runs on the system's Node and node-gyp compiles against the headers
// `nodedir` names: the workspace's .npmrc names Node 22's, but `npm_config_nodedir` in the
// environment (which an install of the appview for the system's Node wants) overrides it, and the
// build then fails to load at `npm start`. This checks that it loads, and rebuilds it against Node
// 22's headers when it does not.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** Node 22's headers, which the `node` devDependency brings beside its binary (the .npmrc's nodedir). */
const headers = path.join(
  root,
  'node_modules',
  'node',
  'node_modules',
  `node-${process.platform}-${process.arch}`,
);
const rebuild = `npm rebuild better-sqlite3 --nodedir=${headers}`;

/** What loading better-sqlite3 on this Node printed, or undefined when it loads. */
function loadFailure(): string | undefined {
  // A child process: a native module that failed to load once stays loaded in the process that tried.
  const res = spawnSync(process.execPath, ['-e', "new (require('better-sqlite3'))(':memory:').close()"], {
    cwd: root,
    encoding: 'utf8',
  });
  if (res.error !== undefined) throw res.error;
  return res.status === 0 ? undefined : res.stderr;
}

/** One line of a load failure: the native ABI it was built for and the one needed, or its error line. */
function summary(stderr: string): string {
  const abi = /NODE_MODULE_VERSION (\d+)[\s\S]*NODE_MODULE_VERSION (\d+)/.exec(stderr);
  if (abi !== null) return `built for NODE_MODULE_VERSION ${abi[1]}, Node ${process.version} needs ${abi[2]}`;
  return (stderr.split('\n').find((l) => /Error/.test(l)) ?? stderr.split('\n')[0] ?? '').trim();
}

const first = loadFailure();
if (first !== undefined) {
  if (!/NODE_MODULE_VERSION/.test(first) || !fs.existsSync(path.join(headers, 'include', 'node'))) {
    console.error(
      `npm install: better-sqlite3 does not load on Node ${process.version} (${summary(first)}).`,
    );
    process.exit(1);
  }
  const nodedir = process.env['npm_config_nodedir'];
  console.error(
    `npm install: better-sqlite3 was compiled for another Node (${summary(first)})${nodedir === undefined ? '' : `; npm_config_nodedir names ${nodedir}`}; compiling it again for the workspace's Node ${process.version}.`,
  );
  // On the command line, --nodedir outranks the environment; the variable is dropped all the same,
  // so that nothing below npm sees the other Node's headers.
  const env = { ...process.env };
  for (const key of Object.keys(env)) if (key.toLowerCase() === 'npm_config_nodedir') delete env[key];
  const npmCli = process.env['npm_execpath'];
  const res =
    npmCli === undefined
      ? spawnSync('npm', ['rebuild', 'better-sqlite3', `--nodedir=${headers}`], {
          cwd: root,
          env,
          stdio: 'inherit',
        })
      : spawnSync(
          process.env['npm_node_execpath'] ?? 'node',
          [npmCli, 'rebuild', 'better-sqlite3', `--nodedir=${headers}`],
          { cwd: root, env, stdio: 'inherit' },
        );
  if (res.error !== undefined) throw res.error;
  const second = loadFailure();
  if (res.status !== 0 || second !== undefined) {
    console.error(
      `npm install: better-sqlite3 still does not load on Node ${process.version}${second === undefined ? '' : ` (${summary(second)})`}; run \`${rebuild}\` in ${root} and read its errors.`,
    );
    process.exit(1);
  }
}
