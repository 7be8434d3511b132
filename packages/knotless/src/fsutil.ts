import fs from 'node:fs';
import path from 'node:path';

/** Writes a file atomically (temp file + rename) so a reader never sees half of it. */
export function writeFileAtomic(file: string, data: string | Uint8Array, mode = 0o600): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  fs.writeFileSync(tmp, data, { mode });
  fs.renameSync(tmp, file);
}

/** Reads and parses a JSON file, or returns undefined when it does not exist or is unreadable. */
export function readJson<T>(file: string): T | undefined {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}
