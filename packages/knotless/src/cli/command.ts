import type { ParseArgsConfig } from 'node:util';
import type { Context } from '../context.ts';
import type { Io } from './io.ts';

/** Parsed arguments of one command. */
export interface Args {
  positionals: string[];
  values: Record<string, string | boolean | string[] | undefined>;
}

/** One CLI command: its usage and what it does. Exit codes are not its business (see exit-codes.ts). */
export interface Command {
  usage: string;
  summary: string;
  options?: ParseArgsConfig['options'];
  /** How many positional arguments it takes. */
  positionals: { min: number; max: number };
  run(env: { ctx: () => Context; io: Io; args: Args }): Promise<void>;
}

/** Reads a string option. */
export function stringOption(args: Args, name: string): string | undefined {
  const v = args.values[name];
  return typeof v === 'string' ? v : undefined;
}
