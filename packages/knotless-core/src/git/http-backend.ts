import { spawn } from 'node:child_process';
import type http from 'node:http';
import { childPath } from '../config/env.ts';

/** One smart-HTTP request handed to `git http-backend`. */
export interface HttpBackendRequest {
  /** GIT_PROJECT_ROOT: the folder the repositories are in. */
  projectRoot: string;
  /** PATH_INFO: `/<repository>/<service>`, e.g. `/r.git/info/refs`, relative to `projectRoot`. */
  pathInfo: string;
  /** The URL's query without `?` (`service=git-upload-pack`). */
  query: string;
  /** Whether pushes are accepted; upload-pack (clone, fetch) always is. */
  receivePack: boolean;
  /** REMOTE_USER, which http-backend records in the reflog of a push. */
  remoteUser?: string;
  /** When it aborts, git is killed and nothing more is written: the caller answers (or cuts). */
  signal?: AbortSignal;
}

/**
 * Answers one smart-HTTP request by running `git http-backend` as CGI: git itself serves info/refs,
 * upload-pack and receive-pack, protocol v2 included (the Git-Protocol header is passed through). No
 * web server package is needed: CGI is a process with an environment, a body on stdin and headers
 * on stdout. Used by the appview (read-only clones) and by the dev network's plain-git peer, so the
 * CGI answer is read one way. Git reads no system or user configuration: only what is set here.
 */
export function serveHttpBackend(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  r: HttpBackendRequest,
): void {
  const { signal } = r;
  const child = spawn('git', ['http-backend'], {
    env: {
      PATH: childPath(),
      GIT_PROJECT_ROOT: r.projectRoot,
      GIT_HTTP_EXPORT_ALL: '1',
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_CONFIG_COUNT: '3',
      GIT_CONFIG_KEY_0: 'http.receivepack',
      GIT_CONFIG_VALUE_0: String(r.receivePack),
      GIT_CONFIG_KEY_1: 'http.uploadpack',
      GIT_CONFIG_VALUE_1: 'true',
      // Partial clones (`--filter=blob:none`, `blob:limit=`, `tree:0`) and the fetches that fill
      // them in later: without it upload-pack ignores a filter and sends everything.
      GIT_CONFIG_KEY_2: 'uploadpack.allowFilter',
      GIT_CONFIG_VALUE_2: 'true',
      REQUEST_METHOD: req.method ?? 'GET',
      PATH_INFO: r.pathInfo,
      QUERY_STRING: r.query,
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      REMOTE_ADDR: req.socket.remoteAddress ?? '',
      ...(r.remoteUser === undefined ? {} : { REMOTE_USER: r.remoteUser }),
      ...(req.headers['content-encoding'] === undefined
        ? {}
        : { HTTP_CONTENT_ENCODING: String(req.headers['content-encoding']) }),
      ...(req.headers['git-protocol'] === undefined
        ? {}
        : { GIT_PROTOCOL: String(req.headers['git-protocol']) }),
    },
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  const stop = (): void => void child.kill('SIGKILL');
  if (signal?.aborted === true) stop();
  signal?.addEventListener('abort', stop, { once: true });
  child.on('exit', () => signal?.removeEventListener('abort', stop));
  req.pipe(child.stdin);
  // git may stop reading its input early (a bad request, or killed): its exit status and the missing
  // answer tell, not the EPIPE of the body it did not read.
  child.stdin.on('error', () => {});
  let head = Buffer.alloc(0);
  let headerDone = false;
  child.stdout.on('data', (chunk: Buffer) => {
    // Aborted: the caller's answer (or the cut) stands; git's late output goes nowhere.
    if (signal?.aborted === true) return;
    if (headerDone) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end === -1) return;
    headerDone = true;
    const { status, headers } = parseCgiHead(head.subarray(0, end).toString('latin1'));
    for (const [name, value] of headers) res.setHeader(name, value);
    res.writeHead(status);
    res.write(head.subarray(end + 4));
  });
  child.stdout.on('end', () => {
    if (signal?.aborted === true) return;
    if (!headerDone) res.writeHead(500, { 'content-type': 'text/plain' }).end('git http-backend failed\n');
    else res.end();
  });
  child.on('error', () => res.destroy());
  // The reader left before the answer's end: git's work is for no one. (After a complete answer git
  // may still be finishing a push, e.g. its reflog; it is left to exit.)
  res.on('close', () => {
    if (!res.writableFinished) child.kill();
  });
}

/** A CGI answer's header block: `Status: 404 Not Found` sets the status (200 without it), the rest are headers. */
export function parseCgiHead(block: string): { status: number; headers: [string, string][] } {
  let status = 200;
  const headers: [string, string][] = [];
  for (const line of block.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === 'status') {
      const code = Number(value.split(' ')[0]);
      if (Number.isInteger(code) && code >= 100 && code <= 599) status = code;
    } else headers.push([name, value]);
  }
  return { status, headers };
}
