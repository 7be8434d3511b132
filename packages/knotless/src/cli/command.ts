import type { Context } from '../context.ts';
import type { Io } from './io.ts';

/** Parsed arguments of one command. */
export interface Args {
  positionals: string[];
  values: Record<string, string | boolean | string[] | undefined>;
}

/** One option of a command, with what `--help` says of it. */
export interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
  multiple?: boolean;
  /** The value's name in help (`--branch B`); string options and `optionalValue` ones. */
  value?: string;
  /**
   * A boolean option that may carry a value: `--password=P`, or the word after it when the command
   * would otherwise have one argument too many (`login alice.test --password P`). Its value is then
   * a string instead of `true`.
   */
  optionalValue?: boolean;
  help: string;
}

/**
 * One CLI command. Everything `--help` and `knotless help` print comes from here, so that the help
 * and the parser cannot drift apart. Exit codes are not a command's business (see exit-codes.ts).
 */
export interface Command {
  /** The words that run it, e.g. `repo create`. */
  name: string;
  /** The positional arguments as help shows them, e.g. `<[handle/]name>`. */
  args: string;
  summary: string;
  /** Paragraphs `--help` prints after the usage. */
  details?: string[];
  options?: Record<string, OptionSpec>;
  /** How many positional arguments it takes. */
  positionals: { min: number; max: number };
  examples?: string[];
  run(env: { ctx: () => Context; io: Io; args: Args }): Promise<void>;
}

/** Reads a string option. */
export function stringOption(args: Args, name: string): string | undefined {
  const v = args.values[name];
  return typeof v === 'string' ? v : undefined;
}

/** The option `--json`, shared by every listing and info command. */
export const JSON_OPTION: OptionSpec = { type: 'boolean', help: 'print JSON instead of text' };
