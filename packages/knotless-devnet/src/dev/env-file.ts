import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { writeFileAtomic } from 'knotless-core/fsutil';

/**
 * The knotless package's executables (its bin stubs), by name. The dev network wraps the knotless
 * it is installed beside; knotless itself never loads this package (`knotless dev` runs it as a
 * separate program).
 */
export function knotlessScripts(): Record<string, string> {
  const manifest = createRequire(import.meta.url).resolve('knotless/package.json');
  const { bin } = JSON.parse(fs.readFileSync(manifest, 'utf8')) as { bin: Record<string, string> };
  return Object.fromEntries(
    Object.entries(bin).map(([name, script]) => [name, path.join(path.dirname(manifest), script)]),
  );
}

/** Quotes a value for a POSIX shell. */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/**
 * Writes DIR/bin wrappers that run each executable on this very Node (the project's Node 22): git
 * starts the helper outside npm, where `#!/usr/bin/env node` would find whatever node is on PATH.
 */
export function writeWrappers(binDir: string, node: string = process.execPath): void {
  fs.mkdirSync(binDir, { recursive: true });
  for (const [name, script] of Object.entries(knotlessScripts())) {
    if (!fs.existsSync(script)) continue;
    writeFileAtomic(
      path.join(binDir, name),
      // A Node script runs on `node`; the helper's own launcher (a shell script) is told to use it.
      /\.[cm]?[jt]s$/.test(script)
        ? `#!/bin/sh\nexec ${shellQuote(node)} ${shellQuote(script)} "$@"\n`
        : `#!/bin/sh\nKNOTLESS_NODE=${shellQuote(node)} exec ${shellQuote(script)} "$@"\n`,
      0o755,
    );
  }
}

/** Writes a POSIX shell file that, sourced, points knotless and git at a dev network. */
export function writeEnvFile(file: string, vars: Record<string, string>, binDir: string): void {
  const lines = [
    '# Written by `knotless dev`. Source it: . ' + shellQuote(file),
    '# It makes knotless, and git with knotless:// URLs, act on the dev network as alice.test.',
    'unset KNOTLESS_SERVICE KNOTLESS_IDENTIFIER KNOTLESS_PASSWORD',
    ...Object.entries(vars).map(([k, v]) => `export ${k}=${shellQuote(v)}`),
    `export PATH=${shellQuote(binDir)}:"$PATH"`,
    '',
  ];
  writeFileAtomic(file, lines.join('\n'), 0o600);
}
