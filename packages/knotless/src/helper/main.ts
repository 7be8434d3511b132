import fs from 'node:fs';
import path from 'node:path';
import { settleCache } from 'knotless-core/cache/budget';
import { BIN_SCRIPTS } from '../paths.ts';
import { compactLater } from '../compact-later.ts';
import { Context } from '../context.ts';
import { gitRepoEnv, readConfig } from 'knotless-core/config/env';
import { KnotlessError } from 'knotless-core/errors';
import { EXIT_CODES, EXIT_INTERNAL } from 'knotless-core/exit-codes';
import { internalErrorLines, printErr, safeText } from 'knotless-core/text/terminal';
import { closeTransport } from 'knotless-core/xrpc/transport';
import { formatList, nestedRefs } from './list.ts';
import { gitIo, type HelperIo } from './protocol.ts';
import { HelperState } from './state.ts';
import type { RemoteRef } from 'knotless-core/records/remote-repo';
import { parseKnotlessUrl } from 'knotless-core/records/knotless-url';

/** Answers one `option <name> <value>` line. */
function setOption(state: HelperState, name: string, value: string): string {
  const o = state.options;
  switch (name) {
    case 'verbosity':
      o.verbosity = Number(value) || 0;
      // `git push -v` and beyond: say when a request is retried; otherwise retries stay silent.
      state.ctx.retryNotice = o.verbosity > 1 ? (notice) => printErr(`knotless: ${notice}`) : undefined;
      return 'ok';
    case 'progress':
      o.progress = value === 'true';
      return 'ok';
    case 'dry-run':
      o.dryRun = value === 'true';
      return 'ok';
    case 'atomic':
      o.atomic = value === 'true';
      return 'ok';
    case 'cas': {
      const colon = value.lastIndexOf(':');
      o.cas.set(value.slice(0, colon), value.slice(colon + 1));
      return 'ok';
    }
    case 'depth':
    case 'deepen-since':
    case 'deepen-not':
    case 'deepen-relative':
    case 'filter':
      // Shallow and partial fetches are git's own upload-pack's work, over a stateless connection
      // (helper/connect.ts): git sends these before it asks for one, and speaks them there itself.
      state.needsUploadPack =
        name === 'filter' ? '--filter' : '--depth, --shallow-since, --shallow-exclude, --deepen';
      return 'ok';
    case 'pushcert':
      // --signed=if-asked goes on unsigned, as with a receiving end that never asks; --signed stops.
      if (value === 'if-asked') {
        printErr(
          'knotless: warning: not sending a push certificate: knotless does not support signed pushes.',
        );
        return 'ok';
      }
      printErr(
        'knotless: knotless does not support signed pushes (push certificates); push without --signed, or sign commits and tags instead.',
      );
      return 'unsupported';
    case 'push-option':
      // git stops the push on "unsupported", as a bare repository that does not advertise them does.
      printErr(
        'knotless: knotless does not support push options (-o, --push-option): nothing reads them; push without them.',
      );
      return 'unsupported';
    case 'followtags':
    case 'cloning':
    case 'force-if-includes':
      // Tags follow through the list's ^{} lines; the rest needs nothing from us.
      return 'ok';
    default:
      return 'unsupported';
  }
}

/**
 * Whether a fetch needs git's upload-pack (a stateless connection): git asked for a shallow or
 * partial fetch, or the repository fetched into is shallow (git must tell upload-pack its shallow
 * commits, which the fetch path cannot hear).
 */
async function needsUploadPack(state: HelperState, env: NodeJS.ProcessEnv): Promise<boolean> {
  if (state.needsUploadPack !== undefined) return true;
  // git runs its helpers with GIT_DIR set; a helper run without it has no repository to look at.
  if (gitRepoEnv(env).gitDir === undefined) return false;
  const { gitDir } = await import('knotless-core/git/objects');
  return fs.existsSync(path.join(await gitDir(), 'shallow'));
}

/** The refs a fetch is shown: those inside another listed ref left out, each with one warning. */
function shown(refs: Map<string, RemoteRef>): Map<string, RemoteRef> {
  const inner = nestedRefs([...refs.keys()].filter((n) => n !== 'HEAD'));
  if (inner.size === 0) return refs;
  for (const [name, outer] of inner)
    printErr(
      `knotless: warning: ${safeText(name)} is left out: ${safeText(outer)} exists too, and no git repository can hold a ref inside another; the owner can delete one of them.`,
    );
  return new Map([...refs].filter(([name]) => !inner.has(name)));
}

/**
 * The remote helper: speaks git's remote-helper protocol on stdin/stdout (gitremote-helpers(7)), or
 * through `io` (the warm agent running a thin helper's commands, agent/helper-host.ts).
 * Returns the exit status; failures are one sentence on stderr.
 */
export async function helperMain(argv: string[], io: HelperIo = gitIo()): Promise<number> {
  let ctx: Context | undefined;
  const { answer } = io;
  try {
    // git commands this helper (or knotless) runs never start it again: one that did would be a
    // lazy fetch of a partial clone, which recurses without bound (see NESTED_MARKER).
    const config = readConfig(io.env);
    if (config.nested)
      throw new KnotlessError(
        'usage',
        'git-remote-knotless was started by a git command that knotless itself runs (a lazy fetch?); it refuses to run inside itself.',
      );
    const url = argv[1] ?? argv[0];
    if (url === undefined)
      throw new KnotlessError(
        'usage',
        'git-remote-knotless is run by git: use a knotless:// URL as a remote.',
      );
    const state = new HelperState((ctx = new Context(config, { hosted: io.hosted })), parseKnotlessUrl(url));
    // The process's peak memory, for checking that packs stream (performance.md) without a profiler.
    if (config.trace && !io.hosted)
      process.once('exit', () =>
        printErr(`knotless: memory peak ${Math.round(process.resourceUsage().maxRSS / 1024)} MiB`),
      );
    const { reader } = io;
    // The refs git sent push commands for: their writes judged them on swaps (see HelperState.checkView).
    const pushed = new Set<string>();
    // A listing for a push was answered: the warm agent is started, not before git has the push's
    // answer (or sent none). Its start (a Node process loading knotless, connecting, listing) shares
    // the machine's cores with the push: started as git decided, it slowed a first push by a fifth.
    let agentDue = false;
    const startAgentIfDue = async (): Promise<void> => {
      if (!agentDue) return;
      agentDue = false;
      const remote = await state.remote();
      await state.ctx.startAgent({
        bin: BIN_SCRIPTS['knotless']!,
        warn: (m) => printErr(`knotless: warning: ${m}`),
        warm: `${remote.owner.did}/${remote.name}`,
      });
    };
    for (;;) {
      const line = await reader.next();
      if (line === undefined || line === '') {
        await startAgentIfDue();
        await state.checkView(pushed);
        return 0;
      }
      if (line === 'capabilities') answer(['option', 'fetch', 'push', 'stateless-connect', '']);
      else if (line.startsWith('stateless-connect ')) {
        // Only what the fetch path cannot do goes through upload-pack: a plain fetch stays on it
        // (its packs go straight into git's repository, with no mirror to index them into first).
        if (line !== 'stateless-connect git-upload-pack' || !(await needsUploadPack(state, io.env))) {
          answer(['fallback']);
          continue;
        }
        const { statelessConnect } = await import('./connect.ts');
        await statelessConnect(state, io);
        await settleCache(config);
        return 0;
      } else if (line.startsWith('option ')) {
        const [, name = '', ...rest] = line.split(' ');
        answer([setOption(state, name, rest.join(' '))]);
      } else if (line === 'list' || line === 'list for-push') {
        const forPush = line === 'list for-push';
        const refs = await state.list(forPush);
        // A ref that several records claim is shown to a push, so that it can be deleted (any other
        // update of it is refused), and never to a fetch, which would have to pick one.
        const claimed = [...state.contested].map(([name, claims]) => [name, claims[0]!] as const);
        answer([...formatList(forPush ? new Map([...refs, ...claimed]) : shown(refs), forPush), '']);
        // The next push finds the agent (agent/autostart.ts), started once git has this push's answer;
        // a helper the agent hosts has it already.
        if (forPush && !io.hosted) agentDue = true;
      } else if (line.startsWith('fetch ')) {
        if (state.needsUploadPack !== undefined)
          throw new KnotlessError(
            'usage',
            `${state.needsUploadPack} through knotless needs git's protocol version 2, and this git is set to an older one; run the command with \`-c protocol.version=2\`.`,
          );
        // fetch and push load git plumbing and pack code only when git asks for them.
        const { fetchBatch } = await import('./fetch.ts');
        answer([...(await fetchBatch(state, await reader.batch(line))), '']);
        // git has its answer; the cache goes back within its cap before git's next command.
        await settleCache(config);
      } else if (line.startsWith('push ')) {
        const batch = await reader.batch(line);
        for (const l of batch.filter((l) => l.startsWith('option '))) {
          const [, name = '', ...rest] = l.split(' ');
          setOption(state, name, rest.join(' '));
        }
        const { pushBatch } = await import('./push.ts');
        const pushLines = batch.filter((l) => l.startsWith('push '));
        for (const l of pushLines) pushed.add(l.slice(l.lastIndexOf(':') + 1));
        const result = await pushBatch(state, pushLines);
        answer([...result.lines, '']);
        await startAgentIfDue();
        // Past its threshold only (pushes fold small packs into their own write): merging happens in
        // a process of its own that outlives us.
        if (result.compact.length > 0) {
          const remote = await state.remote();
          await compactLater(state.ctx.config, remote.owner.did, remote.name, result.compact);
        }
        await settleCache(config);
      } else {
        throw new KnotlessError(
          'usage',
          `git sent an unknown command "${safeText(line)}"; is this git too new for knotless?`,
        );
      }
    }
  } catch (err) {
    if (err instanceof KnotlessError) {
      printErr(`knotless: ${err.message}`);
      return EXIT_CODES[err.code];
    }
    printErr(...internalErrorLines(err).map((l) => `knotless: ${l}`));
    return EXIT_INTERNAL;
  } finally {
    ctx?.close();
    if (!io.hosted) closeTransport();
  }
}
