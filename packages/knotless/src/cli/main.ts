import { parseArgs } from 'node:util';
import { Context } from '../context.ts';
import { KnotlessError } from '../errors.ts';
import { internalErrorLines } from '../text/terminal.ts';
import { closeTransport } from '../xrpc/transport.ts';
import type { Args, Command } from './command.ts';
import { EXIT_CODES, EXIT_INTERNAL } from './exit-codes.ts';
import { processIo, safeIo, type Io } from './io.ts';
import { COMMANDS, SUMMARIES } from './table.ts';

function help(): string[] {
  const width = Math.max(...SUMMARIES.map(([u]) => u.length));
  return [
    'usage: knotless <command> [options]',
    '',
    ...SUMMARIES.map(([u, s]) => `  ${u.padEnd(width)}  ${s}`),
    '',
    'Reference: docs/reference/cli.md',
  ];
}

/** Finds the command named by the first one or two words of argv. */
function lookup(argv: string[]): { name: string; rest: string[] } | undefined {
  const two = argv.slice(0, 2).join(' ');
  if (COMMANDS[two] !== undefined) return { name: two, rest: argv.slice(2) };
  const one = argv[0];
  if (one !== undefined && COMMANDS[one] !== undefined) return { name: one, rest: argv.slice(1) };
  return undefined;
}

function parse(command: Command, name: string, rest: string[]): Args {
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options: command.options ?? {}, allowPositionals: true, strict: true });
  } catch (err) {
    throw new KnotlessError('usage', `${(err as Error).message}; usage: knotless ${command.usage}`, {
      cause: err,
    });
  }
  const n = parsed.positionals.length;
  if (n < command.positionals.min || n > command.positionals.max) {
    throw new KnotlessError(
      'usage',
      `Wrong number of arguments to ${name}; usage: knotless ${command.usage}`,
    );
  }
  return {
    positionals: parsed.positionals,
    values: parsed.values as Args['values'],
  };
}

/** Runs the CLI and returns the exit status; every failure is turned into a status here. */
export async function main(argv: string[], rawIo: Io = processIo()): Promise<number> {
  const io = safeIo(rawIo);
  let ctx: Context | undefined;
  try {
    if (argv.length === 0 || ['help', '--help', '-h'].includes(argv[0] ?? '')) {
      for (const line of help()) io.out(line);
      return 0;
    }
    const found = lookup(argv);
    if (found === undefined)
      throw new KnotlessError('usage', `Unknown command "${argv.join(' ')}"; run \`knotless help\`.`);
    const { command } = await COMMANDS[found.name]!();
    const args = parse(command, found.name, found.rest);
    await command.run({ ctx: () => (ctx ??= new Context()), io, args });
    return 0;
  } catch (err) {
    if (err instanceof KnotlessError) {
      io.err(`knotless: ${err.message}`);
      return EXIT_CODES[err.code];
    }
    for (const line of internalErrorLines(err)) io.err(`knotless: ${line}`);
    io.err('knotless: this is a bug; please report it with the command you ran.');
    return EXIT_INTERNAL;
  } finally {
    ctx?.close();
    closeTransport();
  }
}
