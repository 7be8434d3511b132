import fs from 'node:fs';
import path from 'node:path';

/** Writes a file atomically (temp file + rename) so a reader never sees half of it. */
export function writeFileAtomic(file: string, data: string | Uint8Array, mode = 0o600): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  fs.writeFileSync(tmp, data, { mode });
  fs.renameSync(tmp, file);
}

/** True for the error of reading a file (or directory) that does not exist. */
export function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** A file's text, or undefined when it does not exist; any other failure to read it surfaces. */
export function readIfPresent(file: string, encoding: BufferEncoding): string | undefined {
  try {
    return fs.readFileSync(file, encoding);
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
}

/**
 * Reads and parses a JSON file, or returns undefined when it does not exist or is not JSON. Every
 * file read so is a cache or a session that knotless wrote whole (writeFileAtomic): one that is not
 * JSON was damaged by something else, and counts as absent (refetched, or logged in again). Any
 * other failure to read it (permissions, I/O) surfaces.
 */
export function readJson<T>(file: string): T | undefined {
  const text = readIfPresent(file, 'utf8');
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    if (err instanceof SyntaxError) return undefined;
    throw err;
  }
}
