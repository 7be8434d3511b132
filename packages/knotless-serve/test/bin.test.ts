// The installed command: bin/knotless-serve.cjs runs the bundle `npm run build` made (the sources are
// not shipped), answers --help, serves pages and stops cleanly on SIGTERM. The install check
// (scripts/install-check.sh) does the same from a packed tarball on the system's Node.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, describe, it } from 'node:test';

const pkg = path.join(import.meta.dirname, '..');
const BIN = path.join(pkg, 'bin', 'knotless-serve.cjs');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-serve-bin-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('the knotless-serve command', () => {
  it('ships only the bin stub, the bundle, the public declarations and the README, and needs only better-sqlite3', () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8')) as {
      bin: Record<string, string>;
      files: string[];
      dependencies: Record<string, string>;
    };
    assert.deepEqual(manifest.bin, { 'knotless-serve': './bin/knotless-serve.cjs' });
    // The declarations of what index.ts exports, and nothing that names a bundled package (see
    // "declares" in packages/knotless/test/packages.test.ts).
    assert.deepEqual(manifest.files, [
      'bin',
      'dist/knotless-serve.cjs',
      'dist/types/index.d.ts',
      'dist/types/config.d.ts',
      'dist/types/main.d.ts',
      'README.md',
    ]);
    assert.deepEqual(Object.keys(manifest.dependencies), ['better-sqlite3']);
    const bundle = fs.readFileSync(path.join(pkg, 'dist', 'knotless-serve.cjs'), 'utf8');
    // Not undici (via @atproto/identity's default fetch): it cannot load on Node 20.
    assert.doesNotMatch(bundle, /undici/);
  });

  it('prints its usage', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [BIN, '--help']);
    assert.match(stdout, /^usage: knotless-serve \[options\]/);
  });

  it('prints its version, and a mistake in its arguments as one sentence (exit 2)', async () => {
    const { version } = JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8')) as {
      version: string;
    };
    for (const flag of ['--version', '-V']) {
      const res = await runBin([flag]);
      assert.deepEqual(res, { code: 0, stdout: `knotless-serve ${version}\n`, stderr: '' }, flag);
    }
    const mistakes: Array<[string[], string]> = [
      [['--bogus'], 'unknown option --bogus'],
      [['--port'], '--port needs a value'],
      [['--dev=yes'], '--dev takes no value'],
      [['--port', 'x'], '--port x is not a port number (0 to 65535)'],
      [['--log-level', 'loud'], '--log-level loud is not one of error, warn, info, debug'],
    ];
    for (const [args, what] of mistakes) {
      const res = await runBin(args);
      assert.deepEqual(
        res,
        {
          code: 2,
          stdout: '',
          stderr: `knotless-serve: ${what}; run \`knotless-serve --help\` for its usage.\n`,
        },
        args.join(' '),
      );
    }
  });

  it('starts from the bundle, serves the home page and stops on SIGTERM', async () => {
    const child = spawn(process.execPath, [BIN, '--dev', '--data', dir, '--port', '0'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    let stderr = '';
    const url = await new Promise<string>((resolve, reject) => {
      child.stderr.setEncoding('utf8').on('data', (d: string) => {
        stderr += d;
        const m = /listening on (http:\/\/\S+)/.exec(stderr);
        if (m !== null) resolve(m[1]!);
      });
      void exited.then((code) => reject(new Error(`knotless-serve exited ${code}: ${stderr}`)));
    });
    const res = await fetch(`${url}/`);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /<html/i);
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
  });
});

/** Runs the installed command to its end. */
async function runBin(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { code, stdout, stderr };
}
