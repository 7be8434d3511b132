import './helper-prelude.ts';
import http from 'node:http';
import { findAgent } from '../agent/autostart.ts';
import { readConfig, takeThinHandoff } from 'knotless-core/config/env';
import { checkFolders } from 'knotless-core/config/folders';
import { EXIT_CODES } from 'knotless-core/exit-codes';
import { readSome, writeAllSync, writeStderr } from 'knotless-core/text/fd-io';
import type { Replay } from '../helper/replay.ts';
import type { HelperRecord, StdinPiece } from '../agent/helper-host.ts';

/**
 * The thin helper: what git starts when it runs `git-remote-knotless`. When this build's warm agent
 * runs, it forwards git's remote-helper protocol to it (agent/helper-host.ts), where the helper's code
 * runs warm, and loads nothing else: no bundle of the helper, no atproto library. Otherwise, or when
 * the agent refuses before git's first command was read, `direct` runs the whole helper here as
 * before. This file is its own small bundle (scripts/build.ts), which the committed stub loads first.
 *
 * git's descriptors are never turned into streams (see text/fd-io.ts): stdin is read with plain reads
 * on the thread pool, stdout and stderr written with plain blocking writes, in the order the agent
 * sent them. Only the connection to the agent, which is ours, is a socket.
 */
export function thin(direct: (replay?: Replay) => void): void {
  const handoff = takeThinHandoff();
  if (handoff !== undefined) return takeOver(handoff, direct);
  const found = agentSocket();
  if (found === undefined) return direct();
  const { socket, silenceMs } = found;
  const options: http.RequestOptions & { servername: string } = {
    socketPath: socket,
    // One request on its own connection, and no TLS server name to work out for it: Node's check of
    // whether the host is an IP address compiles its IPv6 pattern, about 5 ms of this process's start.
    agent: false,
    servername: '',
    method: 'POST',
    path: '/helper',
    headers: { host: 'agent', 'content-type': 'application/x-knotless-helper' },
  };
  const req = http.request(options);
  let session: Session | undefined;
  let fellBack = false;
  // Before the agent took the session nothing of git's was read: the helper runs here from the start
  // (a socket left by a killed agent, one stopping, one that does not host helpers). Once.
  const fallBack = (): void => {
    clearTimeout(waiting);
    if (session !== undefined || fellBack) return;
    fellBack = true;
    req.destroy();
    direct();
  };
  // An agent that takes the connection but never answers (stuck, stopped in a debugger) must not
  // hang git: nothing of git's has been read yet, so the helper can still run here from the start.
  const waiting = setTimeout(fallBack, AGENT_ANSWER_MS);
  req.on('error', () => (session === undefined ? fallBack() : session.gone()));
  req.on('response', (res) => {
    clearTimeout(waiting);
    if (res.statusCode !== 200) {
      res.resume();
      return fallBack();
    }
    if (!fellBack) session = new Session(req, res, direct, silenceMs);
  });
  const uid = process.getuid?.();
  req.write(
    `${JSON.stringify({ argv: process.argv.slice(2), cwd: process.cwd(), env: process.env, uid })}\n`,
  );
}

/**
 * Goes on from the thin helper in Perl (bin/git-remote-knotless), which ended its session with the
 * agent as KNOTLESS_THIN_HANDOFF says: `direct` (the agent refused the session or never answered it,
 * before anything of git's was read), `replay <fd> <answered>` (the agent went away mid-session: what
 * was read of git's stdin is in `fd`, the rest still on stdin, and git has `answered` answers), or
 * `silent <ms> <push|command>` (the agent stopped answering for `ms` in the middle of a push or
 * another command). Anything else is not the Perl helper's: the helper runs whole.
 */
function takeOver(handoff: string, direct: (replay?: Replay) => void): void {
  const [how, a, b] = handoff.split(' ');
  const fd = Number(a);
  const n = Number(b);
  if (how === 'replay' && Number.isSafeInteger(fd) && fd > 2 && Number.isSafeInteger(n) && n >= 0) {
    const fs = process.getBuiltinModule('node:fs');
    const read = fs.readFileSync(fd);
    fs.closeSync(fd);
    let first = read.length > 0;
    const source = async (): Promise<Uint8Array | undefined> => {
      if (first) {
        first = false;
        return read;
      }
      const buf = Buffer.alloc(64 * 1024);
      const got = await readSome(0, buf);
      return got === 0 ? undefined : buf.subarray(0, got);
    };
    return direct({ source, answered: n });
  }
  if (how === 'silent' && Number.isFinite(fd) && (b === 'push' || b === 'command'))
    return stopped(fd, b === 'push');
  direct();
}

/**
 * How long the agent may take to answer a session (it answers as soon as it has read the session's
 * first line, in milliseconds on a busy machine) before the helper runs here instead.
 */
const AGENT_ANSWER_MS = 10_000;

/**
 * This build's agent's socket, when one is there to use, with how long the agent may stay silent in
 * the middle of a command (KNOTLESS_AGENT_SILENCE); else undefined (the helper runs directly).
 */
function agentSocket(): { socket: string; silenceMs: number } | undefined {
  let config;
  try {
    config = readConfig();
    if (!config.agent || config.nested) return undefined;
    // Before anything in the cache folder is used (the socket is in it): as the whole helper does.
    checkFolders(config);
  } catch (err) {
    // The whole helper meets the same fault and says it in its own sentence.
    if (err instanceof Error) return undefined;
    throw err;
  }
  const { socket } = findAgent(config);
  return socket === undefined ? undefined : { socket, silenceMs: config.agentSilenceMs };
}

/** One session with the agent: git's stdin goes to it as it asks, its records come back to git's fds. */
class Session {
  readonly #req: http.ClientRequest;
  readonly #direct: (replay?: Replay) => void;
  /** Every piece read from git's stdin so far, in order; undefined for its end. */
  readonly #received: Array<Uint8Array | undefined> = [];
  /** The read on git's stdin in progress: one at a time, and only when the helper's code asks. */
  #reading: Promise<void> | undefined;
  #sent = 0;
  readonly #decoder = new TextDecoder('utf-8');
  /** git's stdin as forwarded so far, to tell whether a push was handed to the agent. */
  #forwarded = '';
  /** The helper's answers git has, and whether one of them was a push's. */
  #answered = 0;
  #pushAnswered = false;
  #exit: number | undefined;
  #over = false;
  /** When the agent was last heard from (any record, its beats among them), in performance.now() ms. */
  #heard = performance.now();
  readonly #silenceMs: number;
  #watch: NodeJS.Timeout | undefined;

  constructor(
    req: http.ClientRequest,
    res: http.IncomingMessage,
    direct: (replay?: Replay) => void,
    silenceMs: number,
  ) {
    this.#req = req;
    this.#direct = direct;
    this.#silenceMs = silenceMs;
    this.#listen(silenceMs);
    let partial = '';
    res.setEncoding('utf8');
    res.on('data', (text: string) => {
      this.#heard = performance.now();
      const lines = (partial + text).split('\n');
      partial = lines.pop()!;
      for (const line of lines) this.#record(JSON.parse(line) as HelperRecord);
    });
    res.on('end', () => this.#end());
    res.on('close', () => this.#end());
    res.on('error', () => this.gone());
  }

  #record(r: HelperRecord): void {
    if ('o' in r) {
      writeAllSync(1, r.o);
      this.#answered++;
      // git waits for each answer before its next command: an answer after a push was sent is its.
      if (PUSH.test(this.#forwarded)) this.#pushAnswered = true;
    } else if ('b' in r) {
      writeAllSync(1, Buffer.from(r.b, 'base64'));
      this.#answered++;
    } else if ('e' in r) writeStderr(r.e);
    else if ('read' in r) void this.#read().then(() => this.#forward());
    else if ('exit' in r) this.#exit = r.exit;
    // A beat: the agent works on the session; hearing it was all it was for.
  }

  /**
   * Checks, `ms` from now, that the agent was heard from within the bound. A live agent beats several
   * times within it (helper-host.ts), so only one that stopped answering (stopped, stuck, its machine
   * frozen) stays silent that long.
   */
  #listen(ms: number): void {
    this.#watch = setTimeout(() => {
      // This process itself may have been held (a blocking write to git, a descheduled process): what
      // the agent sent meanwhile is read first, in this turn's I/O, before the silence is judged.
      setImmediate(() => {
        if (this.#over) return;
        const quiet = performance.now() - this.#heard;
        if (quiet < this.#silenceMs) this.#listen(this.#silenceMs - quiet);
        else this.#silent(quiet);
      });
    }, ms);
  }

  /**
   * The agent stopped answering in the middle of the session: the helper ends ({@link stopped}). Once
   * git has the push's answer, nothing is left but to exit.
   */
  #silent(quietMs: number): void {
    this.#over = true;
    this.#req.destroy();
    if (this.#pushAnswered) process.exit(0);
    stopped(quietMs, PUSH.test(this.#forwarded));
  }

  #end(): void {
    if (this.#over) return;
    if (this.#exit === undefined) return this.gone();
    this.#over = true;
    clearTimeout(this.#watch);
    process.exit(this.#exit);
  }

  /** Reads one more piece of git's stdin (or waits for the read in progress). */
  #read(): Promise<void> {
    this.#reading ??= (async () => {
      const buf = Buffer.alloc(64 * 1024);
      const n = await readSome(0, buf);
      this.#received.push(n === 0 ? undefined : buf.subarray(0, n));
      this.#reading = undefined;
    })();
    return this.#reading;
  }

  /** Sends the agent what it has not had yet of git's stdin. */
  #forward(): void {
    for (; !this.#over && this.#sent < this.#received.length; this.#sent++) {
      const piece = this.#received[this.#sent];
      if (piece === undefined) {
        this.#req.end();
        continue;
      }
      const text = this.#decoder.decode(piece, { stream: true });
      this.#forwarded += text;
      this.#req.write(`${JSON.stringify({ i: text } satisfies StdinPiece)}\n`);
    }
  }

  /**
   * The agent went away mid-session (killed, crashed). Once git has the push's answer, nothing is left
   * to do but exit, as the helper would. Otherwise the helper goes on here, running git's commands again
   * from the start without answering again what git has (helper/replay.ts): a push the agent had not
   * written is written now, one it had is found landed.
   */
  gone(): void {
    if (this.#over) return;
    this.#over = true;
    clearTimeout(this.#watch);
    if (this.#pushAnswered) process.exit(0);
    let next = 0;
    const source = async (): Promise<Uint8Array | undefined> => {
      while (next >= this.#received.length) await this.#read();
      return this.#received[next++];
    };
    this.#direct({ source, answered: this.#answered });
  }
}

/**
 * Ends the helper whose agent stopped answering for `quietMs` in the middle of a command (`push`: a push
 * was handed to it, and git has no answer for it). Going on here is not safe: an agent that stopped may
 * go on later, and the helper's code it runs may have sent a write. So the helper ends with one
 * sentence; git has had no answer for a push whose outcome is unknown, neither `ok` nor a refusal, and
 * is told how to see it.
 */
function stopped(quietMs: number, push: boolean): never {
  const s = `${Math.round(quietMs / 1000)} s`;
  const remote = process.argv[2];
  const named = remote !== undefined && /^[\w.-]+$/.test(remote) ? remote : '<remote>';
  writeStderr(
    push
      ? `knotless: The warm agent stopped answering for ${s} in the middle of the push, so whether it landed is unknown; run \`git ls-remote ${named}\` (or \`git fetch ${named}\`) to see, then push again if it did not.\n`
      : `knotless: The warm agent stopped answering for ${s} in the middle of the command, so the command was stopped; run it again (KNOTLESS_AGENT=0 runs it without the agent).\n`,
  );
  process.exit(EXIT_CODES['pds-unreachable']);
}

/** A push command among git's lines. */
const PUSH = /(^|\n)push /;
