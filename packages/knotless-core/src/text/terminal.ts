import { writeStderr } from './fd-io.ts';

/**
 * Text from the network (ref names, repository names and descriptions, handles, PDS error messages)
 * on its way to a terminal. A hostile repository must not be able to move the cursor, clear the
 * screen, retitle the window, start a new line that looks like ours, or reorder what follows with
 * bidirectional overrides: every such character is shown as a visible escape instead.
 *
 * This is the one place that does it; everything printed that came from elsewhere goes through
 * {@link safeText}.
 */

/** C0 controls, DEL, C1 controls, line and paragraph separators, and the bidi controls. */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/gu;

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function visible(ch: string): string {
  const named = NAMED[ch];
  if (named !== undefined) return named;
  const code = ch.codePointAt(0)!;
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
}

/**
 * `text` with every character that could act on a terminal replaced by a visible escape (`\x1b`,
 * `\n`, `\u{202e}`), cut to `max` characters (with `…`) so that a hostile value cannot flood the
 * screen either. Lone surrogates (not valid text) are shown as U+FFFD.
 */
export function safeText(text: string, max = 200): string {
  const wellFormed = text.replace(LONE_SURROGATE, '\ufffd');
  const cut = wellFormed.length > max ? `${wellFormed.slice(0, max)}…` : wellFormed;
  return cut.replace(UNSAFE, visible);
}

/** True when `text` holds a character {@link safeText} would escape (or a lone surrogate). */
export function hasUnsafe(text: string): boolean {
  return text.search(UNSAFE) !== -1 || text.search(LONE_SURROGATE) !== -1;
}

/**
 * One line of our own text on its way to a terminal, whatever it embeds: {@link safeText} without
 * the length cap (the fields inside were cut where they were composed). Already escaped text passes
 * unchanged, since an escape is printable; a line break inside becomes a visible `\n`, so a hostile
 * value can never start a line that looks like ours.
 */
export function safeLine(text: string): string {
  return safeText(text, Infinity);
}

/**
 * Writes lines of our own text to stderr, each through {@link safeLine}. Every message the helper,
 * the CLI and the agent print goes through here (or through {@link safeLine}): one sink, nothing missed.
 * A plain blocking write ({@link writeStderr}): the stderr we inherited stays as it was.
 */
export function printErr(...lines: string[]): void {
  writeStderr(lines.map((l) => `${safeLine(l)}\n`).join(''));
}

/**
 * JSON for `--json` output: valid JSON with the same value, except that every character
 * {@link safeText} would escape is written as `\uXXXX`. JSON.stringify already escapes C0 controls
 * and lone surrogates, but leaves DEL, C1 controls, the line separators and bidi overrides raw; they
 * can only occur inside strings, where `\uXXXX` means the same character.
 */
export function safeJson(value: unknown): string {
  return (JSON.stringify(value) ?? 'null').replace(
    UNSAFE,
    (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/**
 * The lines that report a bug: the error's name and message as one line (a message may quote the
 * network, so a line break in it must not start a line of its own), then the stack's frames.
 */
export function internalErrorLines(err: unknown): string[] {
  if (!(err instanceof Error)) return [`internal error: ${safeLine(String(err))}`];
  const frames = (err.stack ?? '').split('\n').filter((l) => /^\s+at /.test(l));
  return [`internal error: ${err.name}: ${safeLine(err.message)}`, ...frames];
}
