import type http from 'node:http';
import path from 'node:path';
import { forCaller } from 'knotless-core/caller/scope';
import { readConfig } from 'knotless-core/config/env';
import { safeText } from 'knotless-core/text/terminal';
import type { AgentHost } from './client.ts';

/**
 * What a thin helper (bin/git-remote-knotless-thin.ts) sends first, as one line of JSON: who it is
 * and what git gave it. git's commands follow, as git wrote them to the helper's stdin.
 */
export interface HelperSession {
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  uid: number | undefined;
}

/**
 * What the agent answers, one JSON object a line (NDJSON): `{"o": text}` for the helper's stdout (git's
 * protocol), `{"b": base64}` for bytes to it (a stateless connection's packs), `{"e": text}` for its
 * stderr, in the order the helper wrote them, `{"read": true}` when the helper wants more of git's
 * stdin, `{"beat": 1}` every so often while the session lasts (see {@link beatEveryMs}), and last
 * `{"exit": n}`.
 */
export type HelperRecord =
  { o: string } | { b: string } | { e: string } | { read: true } | { beat: 1 } | { exit: number };

/**
 * How often the agent tells a thin helper it is alive, for a helper that gives up after `silenceMs`
 * without a record (KNOTLESS_AGENT_SILENCE of its command): four beats within it, so that a busy
 * machine delaying one or two does not make a working agent look stopped; at least every 5 s, so that
 * a long bound is not needed to read the beats.
 */
export function beatEveryMs(silenceMs: number): number {
  return Math.min(5000, silenceMs / 4);
}

/**
 * What a thin helper sends after its session line, one JSON object a line: `{"i": text}`, one piece of
 * git's stdin for each `read` asked, and the end of the request at the end of git's stdin.
 */
export interface StdinPiece {
  i: string;
}

/** One thin helper's session, as the helper's code is handed it. */
export interface HostedSession {
  argv: string[];
  env: Record<string, string>;
  /** The next piece of git's stdin; undefined at its end. */
  read: () => Promise<Uint8Array | undefined>;
  /** Writes one answer to git. */
  answer: (lines: string[]) => void;
  /** Writes bytes to git (a stateless connection's answers). */
  write: (bytes: Uint8Array) => void;
  /** The agent hosting the session, for the helper's requests, views and notices: calls, not its socket. */
  agent: AgentHost;
}

/** Runs the helper's code for a session and gives its exit status (helper/main.ts's `helperMain`). */
export type HelperRunner = (session: HostedSession) => Promise<number>;

let runner: HelperRunner | undefined;

/**
 * Lets this process's agent host thin helpers' sessions with `run`. The helper's code is above the
 * agent (docs/architecture.md): the entry point that has both hands it over (bin/knotless.ts).
 */
export function hostHelpers(run: HelperRunner): void {
  runner = run;
}

/** The longest line a thin helper sends: its environment, with room to spare. */
const LINE_MAX = 1024 * 1024;

/** The JSON lines of a request's body, one at a time; undefined at its end. */
function jsonLines(req: http.IncomingMessage): () => Promise<unknown> {
  const it = req.setEncoding('utf8')[Symbol.asyncIterator]() as AsyncIterator<string>;
  let buffer = '';
  return async () => {
    for (;;) {
      const eol = buffer.indexOf('\n');
      if (eol !== -1) {
        const line = buffer.slice(0, eol);
        buffer = buffer.slice(eol + 1);
        return JSON.parse(line) as unknown;
      }
      if (buffer.length > LINE_MAX) throw new Error('a line of the thin helper is too long');
      const next = await it.next();
      if (next.done === true) return undefined;
      buffer += next.value;
    }
  };
}

function isStrings(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((v) => typeof v === 'string');
}

/** The session line, checked; a sentence saying what is wrong with it otherwise. */
function parseSession(value: unknown): HelperSession | string {
  const s = value as Partial<HelperSession> | null;
  if (typeof s !== 'object' || s === null) return 'not an object';
  if (!isStrings(s.argv)) return 'argv is not a list of strings';
  if (typeof s.cwd !== 'string' || !path.isAbsolute(s.cwd)) return 'cwd is not an absolute path';
  const env = s.env;
  if (typeof env !== 'object' || env === null || !Object.values(env).every((v) => typeof v === 'string'))
    return 'env is not a map of strings';
  // The socket is reachable by its owner only (autostart.ts): a caller claiming another user is not
  // one of our helpers, and nothing is done for it.
  if (s.uid !== process.getuid?.()) return 'the helper runs as another user';
  return { argv: s.argv, cwd: s.cwd, env, uid: s.uid };
}

/**
 * `POST /helper`: runs a thin helper's session here, warm: the same helper code (helper/main.ts, handed
 * over with {@link hostHelpers}) reads
 * git's commands from the request's body and answers through the response, with the helper's
 * directory and environment for everything it runs and its stderr for everything it prints
 * (caller/scope.ts). The helper's own requests, its view and what it wrote reach this agent through
 * `agent`, in this process, as a helper's through the socket would.
 */
export async function hostHelper(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  log: (line: string) => void,
  agent: AgentHost,
): Promise<void> {
  if (runner === undefined) {
    // No helper code in this process: the thin helper runs the whole helper itself.
    res.writeHead(404).end();
    return;
  }
  const run = runner;
  const next = jsonLines(req);
  let first: unknown;
  try {
    first = await next();
  } catch (err) {
    // Not JSON: not one of our helpers; refused below.
    if (!(err instanceof SyntaxError)) throw err;
  }
  const session = first === undefined ? 'no session line' : parseSession(first);
  if (typeof session === 'string') {
    log(`refused a helper session: ${safeText(session)}`);
    res.writeHead(400, { 'content-type': 'text/plain' }).end(session);
    return;
  }
  res.writeHead(200, { 'content-type': 'application/x-ndjson' });
  res.flushHeaders();
  const send = (record: HelperRecord): void => {
    // The helper went away (git was killed): nobody reads what is left, as with a closed pipe.
    if (!res.writableEnded && !res.destroyed) res.write(`${JSON.stringify(record)}\n`);
  };
  // A push or a fetch may be long without a record for git (a slow PDS, a big pack): the beats tell the
  // thin helper that the agent still works on it, so that it gives up only on an agent that stopped
  // (its bound counts silence, not the length of the command).
  const beats = setInterval(() => send({ beat: 1 }), beatEveryMs(readConfig(session.env).agentSilenceMs));
  try {
    // git's stdin is read only when the helper's code asks, as the helper reads its own: a read left
    // waiting on git's pipe would keep the thin helper from exiting.
    const stdin = async (): Promise<Uint8Array | undefined> => {
      // git went away: its stdin has ended, as a helper process reading it would find.
      if (req.destroyed) return undefined;
      send({ read: true });
      let piece: StdinPiece | undefined;
      try {
        piece = (await next()) as StdinPiece | undefined;
      } catch (err) {
        // The connection was cut under the read (git killed or interrupted): the same end. A line that
        // is not JSON, or too long, is still the fault it is.
        if (req.destroyed && !(err instanceof SyntaxError)) return undefined;
        throw err;
      }
      return piece === undefined ? undefined : Buffer.from(String(piece.i), 'utf8');
    };
    // The thin helper's connection closed before the session's end: git was interrupted (Ctrl-C reaches
    // git and its helper together) or killed. A helper process would have died with it mid-work, so the
    // session ends now rather than at its next read or request: nobody waits for it any more.
    let hungUp = false;
    let hangUp = (): void => {};
    const wentAway = new Promise<'gone'>((resolve) => (hangUp = () => resolve('gone')));
    res.once('close', () => {
      if (res.writableFinished) return;
      hungUp = true;
      log(
        'a helper went away mid-session (git interrupted or killed): what is left of its work sends nothing',
      );
      hangUp();
    });
    const caller = {
      env: session.env,
      cwd: session.cwd,
      stderr: (e: string) => send({ e }),
      gone: () => hungUp,
    };
    const work = forCaller(caller, () =>
      run({
        argv: session.argv,
        env: session.env,
        read: stdin,
        answer: (lines) => send({ o: lines.map((l) => `${l}\n`).join('') }),
        write: (bytes) => send({ b: Buffer.from(bytes).toString('base64') }),
        agent,
      }),
    );
    const code = await Promise.race([work, wentAway]);
    if (code === 'gone') {
      // A request already on its way (a write among them) goes on as the agent's own work, and its
      // outcome reaches the views; what the session's code would do after it is refused (`gone`).
      log(`the session of the helper that went away ended (status ${INTERRUPTED}) at once`);
      work.then(
        (late) => log(`what was left of that session's work stopped (status ${late})`),
        (err: unknown) =>
          log(
            `what was left of that session's work stopped: ${safeText(err instanceof Error ? err.message : String(err))}`,
          ),
      );
      return;
    }
    if (hungUp) log(`the session of the helper that went away ended (status ${code})`);
    send({ exit: code });
    res.end();
  } finally {
    clearInterval(beats);
  }
}

/** A session git abandoned ends as a process killed by SIGINT would: 128 + 2. */
const INTERRUPTED = 130;
