import { parseArgs, type ParseArgsConfig } from 'node:util';
import { KnotlessError } from 'knotless-core/errors';
import type { Args, Command } from './command.ts';

/** What the words after a command ask for: its help, or a run with these arguments. */
export type Parsed = { help: true } | { help: false; args: Args };

function usageError(c: Command, what: string): KnotlessError {
  return new KnotlessError('usage', `${what}; run \`knotless ${c.name} --help\` for its usage.`);
}

/**
 * Parses a command's arguments. node:util's parseArgs splits them into tokens; the checks are ours,
 * made on the tokens' data, so that each mistake gets one sentence of our own (parseArgs' messages
 * are long, quote oddly and name no command).
 */
export function parseCommandArgs(c: Command, argv: string[]): Parsed {
  const options: NonNullable<ParseArgsConfig['options']> = { help: { type: 'boolean', short: 'h' } };
  for (const [name, o] of Object.entries(c.options ?? {})) {
    options[name] = { type: o.type, ...(o.short === undefined ? {} : { short: o.short }) };
  }
  const { tokens } = parseArgs({ args: argv, options, allowPositionals: true, strict: false, tokens: true });
  if (tokens.some((t) => t.kind === 'option' && t.name === 'help')) return { help: true };
  let positionals: string[] = [];
  const values: Args['values'] = {};
  /** The words right after options that may take a value (see OptionSpec.optionalValue). */
  const maybeValues: Array<{ name: string; at: number }> = [];
  for (const [i, t] of tokens.entries()) {
    if (t.kind === 'positional') positionals.push(t.value);
    if (t.kind !== 'option') continue;
    const spec = c.options?.[t.name];
    if (spec === undefined) throw usageError(c, `\`knotless ${c.name}\` has no option ${t.rawName}`);
    if (spec.type === 'boolean') {
      if (t.inlineValue === true && spec.optionalValue === true) values[t.name] = t.value ?? '';
      else if (t.inlineValue === true) throw usageError(c, `${t.rawName} takes no value`);
      else values[t.name] = true;
      const next = tokens[i + 1];
      if (spec.optionalValue === true && t.inlineValue !== true && next?.kind === 'positional')
        maybeValues.push({ name: t.name, at: positionals.length });
      continue;
    }
    if (t.value === undefined) throw usageError(c, `${t.rawName} needs a value`);
    const prev = values[t.name];
    values[t.name] = spec.multiple === true ? [...(Array.isArray(prev) ? prev : []), t.value] : t.value;
  }
  const { min, max } = c.positionals;
  const taken = positionals.length > max ? maybeValues[0] : undefined;
  if (taken !== undefined) {
    values[taken.name] = positionals[taken.at]!;
    positionals = positionals.filter((_, j) => j !== taken.at);
  }
  if (positionals.length < min || positionals.length > max) {
    const want = min === max ? `${min}` : max === Infinity ? `at least ${min}` : `${min} to ${max}`;
    const noun = max === 1 && min === 1 ? 'argument' : 'arguments';
    throw usageError(
      c,
      `\`knotless ${c.name}\` takes ${want} ${noun} (${c.args || 'none'}), not ${positionals.length}`,
    );
  }
  return { help: false, args: { positionals, values } };
}
