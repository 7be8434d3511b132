// The appview's log: levelled, and structured. In production each line is a JSON object (pino, the
// logger atproto's own services use): `level`, `time`, `msg`, and the fields of the request it was
// written for (`req`, the signed-in `account`, the `repo`), so an operator can follow one request or
// one repository through the log. Where a caller takes the lines itself (the dev network, the
// tests), each is the message as text, its fields after it as `key=value`.
import { AsyncLocalStorage } from 'node:async_hooks';
import pino from 'pino';
import { safeText } from 'knotless-core';
import { LOG_LEVELS, type LogLevel } from './config.ts';

/** What a line says of the request it was written for. */
export interface LogFields {
  /** The request: its method and path, and a number of this process's. */
  req?: string;
  /** The signed-in reader's DID. */
  account?: string;
  /** The repository the request is about, `owner/name`. */
  repo?: string;
}

type Write = (msg: string, fields?: Record<string, unknown>) => void;

/** Logging at a level; called as a function, it logs at `info`. */
export interface Log {
  (line: string, fields?: Record<string, unknown>): void;
  error: Write;
  warn: Write;
  info: Write;
  debug: Write;
}

const scope = new AsyncLocalStorage<LogFields>();
let requests = 0;

/** Runs a request's work with its fields on every line logged for it. */
export function withRequestLog<T>(method: string | undefined, path: string, work: () => T): T {
  requests += 1;
  return scope.run({ req: `${requests} ${method ?? '?'} ${path}` }, work);
}

/** Adds fields to the current request's lines (the reader once known, the repository once found). */
export function logFields(fields: LogFields): void {
  const current = scope.getStore();
  if (current !== undefined) Object.assign(current, fields);
}

function make(emit: (level: LogLevel, msg: string, fields: Record<string, unknown>) => void): Log {
  // Log lines carry network text (handles, repository names, PDS errors, request paths): one escape
  // here covers every line, whoever wrote it.
  const at =
    (level: LogLevel): Write =>
    (msg, fields = {}) =>
      emit(level, safeText(msg, 2000), { ...scope.getStore(), ...fields });
  const log = ((line: string, fields?: Record<string, unknown>) => at('info')(line, fields)) as Log;
  log.error = at('error');
  log.warn = at('warn');
  log.info = at('info');
  log.debug = at('debug');
  return log;
}

/** JSON lines on `stream` (stderr by default), at `level` and above. */
export function jsonLog(level: LogLevel, stream: { write(line: string): unknown } = process.stderr): Log {
  const logger = pino(
    { level, base: { name: 'knotless-serve' }, timestamp: pino.stdTimeFunctions.isoTime },
    stream,
  );
  return make((l, msg, fields) => logger[l](fields, msg));
}

/** Each line as text to `write`, at `level` and above: the message, then its fields as `key=value`. */
export function textLog(level: LogLevel, write: (line: string) => void): Log {
  const rank = (l: LogLevel) => LOG_LEVELS.indexOf(l);
  return make((l, msg, fields) => {
    if (rank(l) > rank(level)) return;
    const tail = Object.entries(fields)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => ` ${k}=${safeText(typeof v === 'string' ? v : JSON.stringify(v), 300)}`)
      .join('');
    write(`${l === 'info' ? '' : `${l}: `}${msg}${tail}`);
  });
}
