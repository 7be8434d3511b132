import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../paths.ts';
import { settleCache } from 'knotless-core/cache/budget';
import { Context } from '../context.ts';
import { KnotlessError } from 'knotless-core/errors';
import { EXIT_CODES, EXIT_INTERNAL } from 'knotless-core/exit-codes';
import { internalErrorLines } from 'knotless-core/text/terminal';
import { closeTransport } from 'knotless-core/xrpc/transport';
import { parseCommandArgs } from './args.ts';
import type { Command } from './command.ts';
import { commandHelp, groupHelp, overview } from './help.ts';
import { processIo, safeIo, type Io } from './io.ts';
import { COMMANDS, GROUPS } from './table.ts';

/** The version in the package's package.json (read only when asked). */
export function version(): string {
  const pkg = JSON.parse(fs.readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}

async function load(names: string[]): Promise<Command[]> {
  return Promise.all(names.map(async (n) => (await COMMANDS[n]!()).command));
}

/** Finds the command named by the first one or two words of argv. */
function lookup(argv: string[]): { name: string; rest: string[] } | undefined {
  const two = argv.slice(0, 2).join(' ');
  if (COMMANDS[two] !== undefined) return { name: two, rest: argv.slice(2) };
  const one = argv[0];
  if (one !== undefined && COMMANDS[one] !== undefined) return { name: one, rest: argv.slice(1) };
  return undefined;
}

/** Prints text of several lines (help), a line per call as safeIo wants. */
function printLines(io: Io, text: string): void {
  for (const line of text.split('\n')) io.out(line);
}

const HELP_WORDS = ['help', '--help', '-h'];

/** Answers the words that ask for help or the version instead of running a command; false: none. */
async function answerMeta(argv: string[], io: Io): Promise<boolean> {
  const [first, ...rest] = argv;
  if (first === undefined || (HELP_WORDS.includes(first) && rest.length === 0)) {
    printLines(io, overview(await load(Object.keys(COMMANDS)), version()));
    return true;
  }
  if (first === '--version' || first === '-V' || first === 'version') {
    io.out(`knotless ${version()}`);
    return true;
  }
  const about = GROUPS[first];
  if (about !== undefined && (rest.length === 0 || HELP_WORDS.includes(rest[0]!))) {
    const names = Object.keys(COMMANDS).filter((n) => n.startsWith(`${first} `));
    printLines(io, groupHelp(first, about, await load(names)));
    return true;
  }
  return false;
}

/** The sentence for words that name no command: an unknown command, subcommand or option. */
function notFound(argv: string[]): KnotlessError {
  const [first = '', second = ''] = argv;
  const group = GROUPS[first] === undefined ? undefined : first;
  const where = group === undefined ? 'knotless' : `knotless ${group}`;
  const word = group === undefined ? first : second;
  const what = word.startsWith('-')
    ? `no option ${word}; run \`${where} --help\` for its usage`
    : `no ${group === undefined ? 'command' : 'subcommand'} "${word}"; run \`${where} --help\` for the list`;
  return new KnotlessError('usage', `${where} has ${what}.`);
}

/** Runs the CLI and returns the exit status; every failure is turned into a status here. */
export async function main(words: string[], rawIo: Io = processIo()): Promise<number> {
  const io = safeIo(rawIo);
  let ctx: Context | undefined;
  // `knotless help repo create` is `knotless repo create --help`.
  // `knotless help help` and `knotless help --help` are `knotless help`.
  const asked = words[0] === 'help' ? words.slice(1).filter((w) => !HELP_WORDS.includes(w)) : [];
  const argv = words[0] === 'help' ? (asked.length === 0 ? ['help'] : [...asked, '--help']) : words;
  try {
    if (await answerMeta(argv, io)) return 0;
    const found = lookup(argv);
    if (found === undefined) throw notFound(argv);
    const { command } = await COMMANDS[found.name]!();
    const parsed = parseCommandArgs(command, found.rest);
    if (parsed.help) {
      const subs = Object.keys(COMMANDS).filter((n) => n.startsWith(`${found.name} `));
      printLines(io, commandHelp(command, await load(subs)));
      return 0;
    }
    await command.run({ ctx: () => (ctx ??= new Context()), io, args: parsed.args });
    // Within the cap again once the command is done (a no-op unless it stored blobs or packs).
    if (ctx !== undefined) await settleCache(ctx.config);
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
