// Headless Chromium for the browser tests from the @sparticuz/chromium npm package, which ships a
// brotli-compressed headless shell with the libraries a bare Linux lacks (NSS, NSPR, expat from its
// al2023 archive; SwiftShader for drawing) and a font, so the tests need nothing from apt. The
// package's own executablePath() unpacks into a fixed /tmp/chromium and adds the libraries only on
// AWS, so the unpacking is done here instead: once per package version, into
// node_modules/.cache/knotless-chromium/<version>, then reused by every later run.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import { chromium, type BrowserContext } from 'playwright-core';
import { tempDir } from 'knotless-devnet';

/** The unpacked browser: the executable and the environment it must be started with. */
export interface ChromiumBinary {
  executablePath: string;
  env: Record<string, string>;
}

/** Where the package lives and which version it is. */
function sparticuz(): { bin: string; version: string; nodeModules: string } {
  // The package's entry point is <node_modules>/@sparticuz/chromium/build/cjs/index.cjs.
  const pkg = path.resolve(
    path.dirname(createRequire(import.meta.url).resolve('@sparticuz/chromium')),
    '../..',
  );
  const { version } = JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8')) as {
    version: string;
  };
  return { bin: path.join(pkg, 'bin'), version, nodeModules: path.resolve(pkg, '../..') };
}

/** Decompresses a brotli file to `out`. */
async function unbrotli(file: string, out: string, mode: number): Promise<void> {
  await pipeline(
    fs.createReadStream(file),
    zlib.createBrotliDecompress({ chunkSize: 1 << 21 }),
    fs.createWriteStream(out, { mode }),
  );
}

/** Unpacks a brotli-compressed tar into `dir` (tar is part of every Debian base system). The tar is
 *  decompressed to a file first: piped, tar may exit at the archive's end marker before the
 *  padding after it is written, which breaks the pipe. */
async function untar(file: string, dir: string, scratch: string): Promise<void> {
  fs.mkdirSync(dir, { recursive: true });
  const plain = path.join(scratch, path.basename(file, '.br'));
  await unbrotli(file, plain, 0o600);
  await run('tar', ['-x', '-f', plain, '-C', dir]);
  fs.rmSync(plain);
}

async function run(cmd: string, args: string[]): Promise<void> {
  const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  if (code !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (exit ${String(code)}): ${err}`);
}

/** Unpacks everything into a scratch directory, then renames it into place so a half-done
 *  unpacking (a killed run) is never taken for a finished one. */
async function unpack(bin: string, dir: string): Promise<void> {
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const tmp = fs.mkdtempSync(`${dir}.partial-`);
  try {
    await Promise.all([
      unbrotli(path.join(bin, 'chromium.br'), path.join(tmp, 'chromium'), 0o755),
      // SwiftShader's libGLESv2.so and friends must sit beside the executable.
      untar(path.join(bin, 'swiftshader.tar.br'), tmp, tmp),
      untar(path.join(bin, 'al2023.tar.br'), path.join(tmp, 'al2023'), tmp),
      untar(path.join(bin, 'fonts.tar.br'), path.join(tmp, 'fonts'), tmp),
    ]);
    // The shipped fonts.conf names Lambda's directories; this one names only the shipped font, so
    // pages render the same with or without fonts installed on the machine.
    fs.writeFileSync(
      path.join(tmp, 'fonts', 'fonts.conf'),
      `<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n` +
        `  <dir>${path.join(dir, 'fonts', 'fonts')}</dir>\n` +
        `  <cachedir>${path.join(dir, 'fonts', 'cache')}</cachedir>\n</fontconfig>\n`,
    );
    fs.renameSync(tmp, dir);
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true });
    // Another run finished the same unpacking first: use its copy.
    if (fs.existsSync(path.join(dir, 'chromium'))) return;
    throw err;
  }
}

/** The packaged Chromium, unpacked on first use. */
export async function chromiumBinary(): Promise<ChromiumBinary> {
  const { bin, version, nodeModules } = sparticuz();
  const dir = path.join(nodeModules, '.cache', 'knotless-chromium', version);
  if (!fs.existsSync(path.join(dir, 'chromium'))) await unpack(bin, dir);
  const libs = path.join(dir, 'al2023', 'lib');
  const inherited = process.env['LD_LIBRARY_PATH'];
  return {
    executablePath: path.join(dir, 'chromium'),
    env: {
      // The shipped NSS/NSPR/expat first, so the machine's copies (if any) are never used.
      LD_LIBRARY_PATH: inherited ? `${libs}:${inherited}` : libs,
      FONTCONFIG_PATH: path.join(dir, 'fonts'),
    },
  };
}

/**
 * A fresh headless Chromium with its own profile directory, started as the probe of this machine kind
 * does: no sandbox (tests run as root), and none of the background connections a closed network
 * refuses. Both packages' browser tests start it here; `javaScriptEnabled: false` reads pages as a
 * browser without JavaScript does.
 */
export async function launchChromium(options: { javaScriptEnabled?: boolean } = {}): Promise<BrowserContext> {
  const bin = await chromiumBinary();
  // The profile goes when the browser closes, and in any case when this process exits.
  const profile = tempDir('knotless-chromium-');
  let context: BrowserContext;
  try {
    context = await launchIn(profile.dir, bin, options);
  } catch (err) {
    profile.release();
    throw err;
  }
  profiles.set(context, profile.dir);
  // No clock on any action, wait or navigation: Playwright's default of 30 s fails a page that a
  // loaded machine serves slowly. A wait that never ends is caught by the test runner's own guard.
  context.setDefaultTimeout(0);
  // Not on the 'close' event: Chromium still writes to its profile then, until its process ends,
  // which close() waits for.
  const close = context.close.bind(context);
  context.close = async (options) => {
    try {
      await close(options);
    } finally {
      profile.release();
    }
  };
  return context;
}

const profiles = new WeakMap<BrowserContext, string>();

/** The profile directory a context from launchChromium() runs in. */
export function profileOf(context: BrowserContext): string | undefined {
  return profiles.get(context);
}

function launchIn(
  profile: string,
  bin: ChromiumBinary,
  options: { javaScriptEnabled?: boolean },
): Promise<BrowserContext> {
  return chromium.launchPersistentContext(profile, {
    ...options,
    executablePath: bin.executablePath,
    env: { ...process.env, ...bin.env },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
