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
