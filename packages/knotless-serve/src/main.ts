#!/usr/bin/env node
// knotless-serve: the appview's command line. Settings come from options, else the environment.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { safeText } from 'knotless-core';
import { startAppview } from './appview.ts';
import { LOG_LEVELS, defaultConfig, type LogLevel, type ServeConfig } from './config.ts';

const USAGE = `usage: knotless-serve [options] [DID ...]

  --data DIR           data directory (mirrors, cache, SQLite index)   [$KNOTLESS_SERVE_DATA]
  --db CONN            postgres://… or a SQLite file path              [$KNOTLESS_SERVE_DB]
  --host HOST          address to listen on (default 127.0.0.1)        [$KNOTLESS_SERVE_HOST]
  --port PORT          port (default 2583; 0 picks one)                [$KNOTLESS_SERVE_PORT]
  --public-url URL     URL people reach the appview at                 [$KNOTLESS_SERVE_PUBLIC_URL]
  --oauth-key FILE     ES256 private key (PEM) for sign-in             [$KNOTLESS_SERVE_OAUTH_KEY]
  --plc URL            PLC directory (default https://plc.directory)   [$KNOTLESS_PLC_URL]
  --firehose URL       event stream to follow, ws(s)://; repeatable    [$KNOTLESS_SERVE_FIREHOSE, comma-separated]
  --relay URL          find every knotless account through this relay
                       (http(s)://) and follow its stream; repeatable  [$KNOTLESS_SERVE_RELAY, comma-separated]
  --backfill-pds URL   backfill every account of this PDS; repeatable  [$KNOTLESS_SERVE_BACKFILL_PDS]
  --request-timeout MS time limit of a page, file, image or query     [$KNOTLESS_SERVE_REQUEST_TIMEOUT]
  --git-timeout MS     time limit of a smart-HTTP git request          [$KNOTLESS_SERVE_GIT_TIMEOUT]
  --recheck MS         read every known account again this often       [$KNOTLESS_SERVE_RECHECK]
                       (default 21600000: six hours)
  --gap-resync MS      after a relay says it lost events, read every   [$KNOTLESS_SERVE_GAP_RESYNC]
                       account again at most this often (default 300000)
  --webhook-timeout MS time limit of one webhook post (default 10000)  [$KNOTLESS_SERVE_WEBHOOK_TIMEOUT]
  --webhook-retry MS   wait before a failed post's second attempt      [$KNOTLESS_SERVE_WEBHOOK_RETRY]
                       (default 10000; the third waits six times as long)
  --dev                allow loopback/private addresses, .test handles [$KNOTLESS_SERVE_DEV=1]
  --log-level LEVEL    error, warn, info (default) or debug; the log is
                       JSON lines on stderr                            [$KNOTLESS_SERVE_LOG_LEVEL]
  -V, --version        print the version
  -h, --help           print this help
  DID ...              accounts to backfill at start`;

function list(v: string | undefined): string[] {
  return (v ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** A relay's XRPC base: http(s)://host[:port], or its ws(s):// form turned into that. */
function relayUrl(v: string): string {
  const url = new URL(v.replace(/^ws/, 'http'));
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new Error(`--relay ${v} is not an http(s):// or ws(s):// URL`);
  return url.origin + url.pathname.replace(/\/+$/, '');
}

function logLevel(v: string): LogLevel {
  if (!(LOG_LEVELS as readonly string[]).includes(v))
    throw new Error(`--log-level ${safeText(v)} is not one of ${LOG_LEVELS.join(', ')}`);
  return v as LogLevel;
}

const OPTIONS = {
  data: { type: 'string' },
  db: { type: 'string' },
  host: { type: 'string' },
  port: { type: 'string' },
  'public-url': { type: 'string' },
  plc: { type: 'string' },
  'oauth-key': { type: 'string' },
  firehose: { type: 'string', multiple: true },
  relay: { type: 'string', multiple: true },
  'backfill-pds': { type: 'string', multiple: true },
  'request-timeout': { type: 'string' },
  'git-timeout': { type: 'string' },
  recheck: { type: 'string' },
  'gap-resync': { type: 'string' },
  'webhook-timeout': { type: 'string' },
  'webhook-retry': { type: 'string' },
  dev: { type: 'boolean' },
  'log-level': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'V' },
} as const;

/**
 * Parses argv. parseArgs runs loose and the checks are ours, so that a mistake is one sentence
 * (strict parseArgs' messages are long and quote oddly).
 */
function parse(
  argv: string[],
): ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>> {
  const parsed = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: false,
    tokens: true,
    options: OPTIONS,
  });
  for (const t of parsed.tokens) {
    if (t.kind !== 'option') continue;
    const spec = (OPTIONS as Record<string, { type: string }>)[t.name];
    if (spec === undefined) throw new Error(`unknown option ${safeText(t.rawName)}`);
    if (spec.type === 'string' && t.value === undefined) throw new Error(`${t.rawName} needs a value`);
    if (spec.type === 'boolean' && t.inlineValue === true) throw new Error(`${t.rawName} takes no value`);
  }
  return parsed as ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>;
}

/** The version in the package's package.json (the bundle is in dist/, the sources in src/). */
function version(): string {
  const file = path.join(import.meta.dirname, '..', 'package.json');
  return (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version;
}

/** Builds the configuration from argv and the environment. */
export function configFrom(argv: string[], env: Readonly<Record<string, string | undefined>>): ServeConfig {
  const { values, positionals } = parse(argv);
  if (values.help === true) {
    process.stdout.write(USAGE + '\n');
    process.exit(0);
  }
  if (values.version === true) {
    process.stdout.write(`knotless-serve ${version()}\n`);
    process.exit(0);
  }
  const dataDir = path.resolve(
    values.data ?? env['KNOTLESS_SERVE_DATA'] ?? path.join(os.homedir(), '.local/share/knotless/serve'),
  );
  const c = defaultConfig(dataDir);
  const rawPort = values.port ?? env['KNOTLESS_SERVE_PORT'] ?? String(c.port);
  const port = Number(rawPort);
  if (rawPort.trim() === '' || !Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`--port ${safeText(rawPort)} is not a port number (0 to 65535)`);
  const ms = (name: string, v: string | undefined, dflt: number): number => {
    const n = Number(v ?? dflt);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} ${v} is not a number of milliseconds`);
    return n;
  };
  return {
    ...c,
    requestTimeoutMs: ms(
      'request-timeout',
      values['request-timeout'] ?? env['KNOTLESS_SERVE_REQUEST_TIMEOUT'],
      c.requestTimeoutMs,
    ),
    gitTimeoutMs: ms(
      'git-timeout',
      values['git-timeout'] ?? env['KNOTLESS_SERVE_GIT_TIMEOUT'],
      c.gitTimeoutMs,
    ),
    recheckMs: ms('recheck', values.recheck ?? env['KNOTLESS_SERVE_RECHECK'], c.recheckMs),
    gapResyncMs: ms('gap-resync', values['gap-resync'] ?? env['KNOTLESS_SERVE_GAP_RESYNC'], c.gapResyncMs),
    webhookTimeoutMs: ms(
      'webhook-timeout',
      values['webhook-timeout'] ?? env['KNOTLESS_SERVE_WEBHOOK_TIMEOUT'],
      c.webhookTimeoutMs,
    ),
    webhookRetryMs: ms(
      'webhook-retry',
      values['webhook-retry'] ?? env['KNOTLESS_SERVE_WEBHOOK_RETRY'],
      c.webhookRetryMs,
    ),
    database: values.db ?? env['KNOTLESS_SERVE_DB'] ?? c.database,
    host: values.host ?? env['KNOTLESS_SERVE_HOST'] ?? c.host,
    port,
    publicUrl: values['public-url'] ?? env['KNOTLESS_SERVE_PUBLIC_URL'],
    oauthKeyFile: values['oauth-key'] ?? env['KNOTLESS_SERVE_OAUTH_KEY'],
    plcUrl: (values.plc ?? env['KNOTLESS_PLC_URL'] ?? c.plcUrl).replace(/\/+$/, ''),
    firehoses: values.firehose ?? list(env['KNOTLESS_SERVE_FIREHOSE']),
    relays: (values.relay ?? list(env['KNOTLESS_SERVE_RELAY'])).map(relayUrl),
    backfillPdses: values['backfill-pds'] ?? list(env['KNOTLESS_SERVE_BACKFILL_PDS']),
    backfillDids: positionals,
    dev: values.dev === true || /^(1|true|yes)$/i.test(env['KNOTLESS_SERVE_DEV'] ?? ''),
    logLevel: logLevel(values['log-level'] ?? env['KNOTLESS_SERVE_LOG_LEVEL'] ?? c.logLevel),
  };
}

/**
 * Runs the appview until SIGINT or SIGTERM. The installed command (bin/knotless-serve.cjs) calls
 * this from the bundle; `node src/main.ts` runs it from the sources.
 */
export async function main(argv: string[]): Promise<void> {
  let config: ServeConfig;
  try {
    config = configFrom(argv, process.env);
  } catch (err) {
    const what = err instanceof Error ? err.message : String(err);
    process.stderr.write(`knotless-serve: ${what}; run \`knotless-serve --help\` for its usage.\n`);
    process.exit(2);
  }
  let app: Awaited<ReturnType<typeof startAppview>>;
  try {
    app = await startAppview(config);
  } catch (err) {
    process.stderr.write(
      `knotless-serve: could not start: ${safeText(err instanceof Error ? err.message : String(err))}\n`,
    );
    process.exit(1);
  }
  process.stderr.write(`knotless-serve: listening on ${app.url}\n`);
  const stop = (): void => void app.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (import.meta.main) void main(process.argv.slice(2));
