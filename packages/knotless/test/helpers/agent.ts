import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { KNOTLESS_BIN } from './cli.ts';

/** A `knotless agent` process of the test network, and what it printed to stderr. */
export interface RunningAgent {
  child: ChildProcess;
  log(): string;
  stop(): Promise<void>;
}

/** Starts `knotless agent --socket socket` with `env`, once it says it is ready. */
export async function spawnAgent(socket: string, env: Record<string, string>): Promise<RunningAgent> {
  const child = spawn(process.execPath, [KNOTLESS_BIN, 'agent', '--socket', socket], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (/^ready$/m.test(out)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`agent exited ${code}: ${err}`)));
  });
  return {
    child,
    log: () => err,
    stop: async () => {
      if (child.exitCode !== null) return;
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const t0 = Date.now();
      await gone;
      if (process.env['KNOTLESS_TEST_DEBUG'])
        process.stderr.write(`agent exit took ${Date.now() - t0}ms\n${err}\n`);
    },
  };
}

/** The agent's answer for a repository: null when it has no current view, else ref → record. */
export async function agentView(
  socket: string,
  q: { did: string; repo: string; pds: string },
): Promise<Map<string, { target?: string; packs: Array<{ id: string }> }> | null> {
  const body = await new Promise<string>((resolve, reject) => {
    http
      .get({ socketPath: socket, path: `/view?${new URLSearchParams(q).toString()}` }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve(text));
      })
      .on('error', reject);
  });
  const view = JSON.parse(body) as {
    confirmed: boolean;
    refs?: Array<{ record: { ref: string; target?: string; packs: Array<{ id: string }> } }>;
    table?: {
      value: {
        packs: Array<{ id: string }>;
        refs: Array<{ ref: string; target?: string; packs?: number[] }>;
        parts?: unknown[];
      };
    };
  };
  if (!view.confirmed) return null;
  // A repository on its ref table (the default): the view is the table as stored, each entry's packs
  // indices into its pack table.
  if (view.table !== undefined) {
    const { value } = view.table;
    assert.equal(value.parts, undefined, "a table small enough for one record in the agent's view");
    return new Map(
      value.refs.map((r) => [
        r.ref,
        {
          ...(r.target === undefined ? {} : { target: r.target }),
          packs: (r.packs ?? []).map((i) => value.packs[i]!),
        },
      ]),
    );
  }
  return new Map((view.refs ?? []).map((r) => [r.record.ref, r.record]));
}

/** A ref as the agent sends it over its socket (see agent/views.ts). */
export interface WireRefOf {
  key: string;
  cid: string;
  rev?: string;
  record: { ref: string; target?: string };
}

/** Calls the agent's socket: `path` with a JSON body (POST) or none (GET); the answer's text. */
function callAgent(socket: string, path: string, body?: unknown): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        socketPath: socket,
        path,
        method: body === undefined ? 'GET' : 'POST',
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** The agent's view as it sends it (records with their keys and CIDs) and the commit it is at. */
export async function agentWireView(
  socket: string,
  q: { did: string; repo: string; pds: string },
): Promise<{ refs: WireRefOf[]; commit?: string; table?: { cid: string; value: unknown } } | null> {
  const view = JSON.parse((await callAgent(socket, `/view?${new URLSearchParams(q).toString()}`)).text) as {
    confirmed: boolean;
    refs?: WireRefOf[];
    commit?: string;
    table?: { cid: string; value: unknown };
  };
  if (!view.confirmed) return null;
  return {
    refs: view.refs ?? [],
    ...(view.commit ? { commit: view.commit } : {}),
    ...(view.table ? { table: view.table } : {}),
  };
}

/** A TCP relay whose event-stream frames (from the target back to its clients) a test can hold back. */
export interface Gate {
  url: string;
  /**
   * Holds back, in order until {@link release}, every WebSocket data frame the target sends from now
   * on, and every byte of its plain HTTP answers; WebSocket control frames (ping, pong, close) pass.
   */
  hold(): void;
  release(): void;
  /** WebSocket pings its clients have sent (an agent's stream beats every 10 s), on every connection. */
  pings(): number;
  close(): Promise<void>;
}

/**
 * The WebSocket frames complete at the start of `buf` (RFC 6455 §5.2), each with whether it is a
 * control frame, and what is left of a frame still arriving.
 */
function splitFrames(buf: Buffer): { frames: Array<[Buffer, boolean]>; rest: Buffer } {
  const frames: Array<[Buffer, boolean]> = [];
  let at = 0;
  for (;;) {
    if (buf.length - at < 2) break;
    const opcode = buf[at]! & 0x0f;
    const masked = (buf[at + 1]! & 0x80) !== 0;
    let len = buf[at + 1]! & 0x7f;
    let head = 2;
    if (len === 126) {
      if (buf.length - at < 4) break;
      len = buf.readUInt16BE(at + 2);
      head = 4;
    } else if (len === 127) {
      if (buf.length - at < 10) break;
      len = Number(buf.readBigUInt64BE(at + 2));
      head = 10;
    }
    const size = head + (masked ? 4 : 0) + len;
    if (buf.length - at < size) break;
    frames.push([buf.subarray(at, at + size), opcode >= 0x8]);
    at += size;
  }
  return { frames, rest: buf.subarray(at) };
}

/** A server's (unmasked) data frame whose payload `alter` rewrote, its length encoded anew. */
function altered(frame: Buffer, alter: (payload: Buffer) => Buffer): Buffer {
  const short = frame[1]! & 0x7f;
  const head = short === 126 ? 4 : short === 127 ? 10 : 2;
  const payload = alter(frame.subarray(head));
  const len = payload.length;
  const out =
    len < 126
      ? Buffer.from([frame[0]!, len])
      : len < 65536
        ? Buffer.from([frame[0]!, 126, len >> 8, len & 0xff])
        : Buffer.concat([Buffer.from([frame[0]!, 127]), Buffer.alloc(8)]);
  if (len >= 65536) out.writeBigUInt64BE(BigInt(len), 2);
  return Buffer.concat([out, payload]);
}

/**
 * Starts a relay to `target` (an http origin). Pointing an agent's event stream through it (the
 * agent follows the PDS its helpers name) lets a test hold the stream back for a moment: the agent's
 * view then lags the account exactly as on a slow stream, its commit included. Only the stream's
 * events are held, not its heartbeat: the agent pings its stream and cuts one whose pongs stop, as
 * it should on a dead connection, so a gate that held the pongs too would have the agent reconnect
 * (and drop its views) whenever the machine is slow enough for a hold to outlast the heartbeat.
 * `alter`, when given, rewrites each event's payload (a relay that forges what it passes on).
 */
export async function startGate(target: string, alter?: (payload: Buffer) => Buffer): Promise<Gate> {
  const { hostname, port } = new URL(target);
  let held = false;
  let pings = 0;
  const queued: Array<[net.Socket, Buffer]> = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      // One end failing ends the other: the client sees the connection lost, as with any cut.
      s.on('error', () => (s === client ? upstream : client).destroy());
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    // The answer's head first: a WebSocket upgrade (101) is let through and frames follow; any other
    // answer is plain HTTP, held byte for byte.
    let mode: 'head' | 'frames' | 'http' = 'head';
    let pending: Buffer = Buffer.alloc(0);
    // What the client sends goes on as it came; once the connection is a WebSocket, its frames are
    // read too, to count its pings.
    let sent: Buffer = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      if (mode !== 'frames') return;
      const { frames, rest } = splitFrames(Buffer.concat([sent, chunk]));
      sent = rest;
      pings += frames.filter(([frame]) => (frame[0]! & 0x0f) === 0x9).length;
    });
    const send = (chunk: Buffer, control: boolean) => {
      if (held && !control) queued.push([client, chunk]);
      else client.write(chunk);
    };
    upstream.on('data', (chunk: Buffer) => {
      if (mode === 'http') return send(chunk, false);
      pending = Buffer.concat([pending, chunk]);
      if (mode === 'head') {
        const end = pending.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = pending.subarray(0, end + 4);
        pending = pending.subarray(end + 4);
        if (/^HTTP\/1\.1 101 /.test(head.toString('latin1'))) {
          mode = 'frames';
          client.write(head);
        } else {
          mode = 'http';
          send(Buffer.concat([head, pending]), false);
          pending = Buffer.alloc(0);
          return;
        }
      }
      const { frames, rest } = splitFrames(pending);
      pending = rest;
      for (const [frame, control] of frames) send(control || !alter ? frame : altered(frame, alter), control);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    hold: () => void (held = true),
    release: () => {
      held = false;
      for (const [client, chunk] of queued.splice(0)) if (!client.destroyed) client.write(chunk);
    },
    pings: () => pings,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

export { alive } from '../../src/agent/lifecycle.ts';

/** A relay in front of an agent's socket that counts the helper sessions the agent took. */
export interface SessionCounter {
  /** The socket to give helpers (KNOTLESS_AGENT_SOCKET): it leads to the agent's own. */
  socket: string;
  /** Helper sessions (`POST /helper`) the agent answered 200 to, since the relay started. */
  sessions(): number;
  close(): Promise<void>;
}

/**
 * Starts a relay at `socket` to the agent listening at `agentSocket` (started with that as its own
 * KNOTLESS_AGENT_SOCKET, so that the helpers it hosts do not come back through the relay). Each thin
 * helper's session is a connection of its own: one whose request is `POST /helper` and whose answer
 * starts `HTTP/1.1 200` is a session the agent took. Nothing is counted when no agent listens, or
 * when the helper never asks one.
 */
export async function countSessions(socket: string, agentSocket: string): Promise<SessionCounter> {
  let taken = 0;
  const conns = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const up = net.connect(agentSocket);
    for (const s of [client, up]) {
      conns.add(s);
      s.on('close', () => conns.delete(s));
    }
    let asked = '';
    let answered = '';
    client.on('data', (d: Buffer) => {
      if (asked.length < 64) asked += d.toString('latin1');
    });
    let counted = false;
    up.on('data', (d: Buffer) => {
      if (counted || answered.length >= 12) return;
      answered += d.toString('latin1');
      if (answered.length < 12) return;
      counted = asked.startsWith('POST /helper ') && answered.startsWith('HTTP/1.1 200');
      if (counted) taken++;
    });
    client.pipe(up).pipe(client);
    client.on('error', () => up.destroy());
    up.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  return {
    socket,
    sessions: () => taken,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of conns) s.destroy();
        server.close(() => resolve());
      }),
  };
}
