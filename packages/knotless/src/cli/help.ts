import type { Command, OptionSpec } from './command.ts';

/** Help is written for an 80-column terminal. */
const WIDTH = 80;

/** Breaks `text` into lines of at most `width` columns, each after `indent` (a word longer stays whole). */
export function wrap(text: string, width = WIDTH, indent = ''): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line !== '' && indent.length + line.length + 1 + word.length > width) {
      lines.push(indent + line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(indent + line);
  return lines;
}

/** Two columns: each name padded to the widest, its text wrapped beside it. */
function columns(rows: Array<[string, string]>): string[] {
  const left = Math.min(Math.max(...rows.map(([n]) => n.length)), 28);
  const out: string[] = [];
  for (const [name, text] of rows) {
    const pad = ' '.repeat(2 + left + 2);
    const body = wrap(text, WIDTH, pad);
    if (name.length > left) out.push(`  ${name}`, ...body);
    else out.push(`  ${name.padEnd(left)}  ${body[0]?.trimStart() ?? ''}`, ...body.slice(1));
  }
  return out;
}

function optionLabel(name: string, o: OptionSpec): string {
  const long =
    o.type === 'string'
      ? `--${name} ${o.value ?? 'VALUE'}`
      : o.optionalValue === true
        ? `--${name} [${o.value ?? 'VALUE'}]`
        : `--${name}`;
  return o.short === undefined ? long : `-${o.short}, ${long}`;
}

/** The one-line synopsis: `knotless repo create <name> [options]`. */
export function synopsis(c: Command): string {
  return `knotless ${c.name}${c.args === '' ? '' : ` ${c.args}`}${c.options === undefined ? '' : ' [options]'}`;
}

/** What `knotless <command> --help` prints; `subs` are its subcommands (`agent` has `agent stop`). */
export function commandHelp(c: Command, subs: Command[] = []): string {
  const options: Array<[string, string]> = Object.entries(c.options ?? {}).map(([name, o]) => [
    optionLabel(name, o),
    o.multiple === true ? `${o.help} (repeatable)` : o.help,
  ]);
  options.push(['-h, --help', 'show this help']);
  return [
    ...wrap(`usage: ${synopsis(c)}`, WIDTH),
    '',
    ...wrap(c.summary.charAt(0).toUpperCase() + c.summary.slice(1) + '.'),
    ...(c.details ?? []).flatMap((p) => ['', ...wrap(p)]),
    '',
    'options:',
    ...columns(options),
    ...(subs.length === 0
      ? []
      : ['', 'subcommands:', ...columns(subs.map((s) => [s.name.slice(c.name.length + 1), s.summary]))]),
    ...(c.examples === undefined ? [] : ['', 'examples:', ...c.examples.map((e) => `  ${e}`)]),
  ].join('\n');
}

/** What `knotless help` prints: every command (groups by their words) with its summary. */
export function overview(commands: Command[], version: string): string {
  return [
    'usage: knotless <command> [options]',
    '',
    `knotless ${version}: git that lives in your Atmosphere (AT Protocol) account.`,
    '',
    'commands:',
    ...columns(commands.map((c) => [c.name, c.summary])),
    '',
    ...wrap(
      'Run `knotless <command> --help` for its options; `knotless --version` for the version. ' +
        'git uses knotless:// URLs through git-remote-knotless. Reference: docs/reference/cli.md.',
    ),
  ].join('\n');
}

/** What `knotless repo` prints: the group's subcommands. */
export function groupHelp(group: string, about: string, commands: Command[]): string {
  return [
    `usage: knotless ${group} <subcommand> [options]`,
    '',
    ...wrap(about.charAt(0).toUpperCase() + about.slice(1) + '.'),
    '',
    'subcommands:',
    ...columns(commands.map((c) => [c.name.slice(group.length + 1), c.summary])),
    '',
    `Run \`knotless ${group} <subcommand> --help\` for its options.`,
  ].join('\n');
}
