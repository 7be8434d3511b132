import { spawn } from 'node:child_process';
import type http from 'node:http';
import path from 'node:path';

/**
 * Serves one mirror read-only over git's smart HTTP protocol by running `git http-backend` as CGI:
 * git itself answers info/refs and upload-pack, protocol v2 included (the Git-Protocol header is
 * passed through). Pushes are refused before git is started; http-backend would refuse them too,
 * as receive-pack is off and no user is authenticated. When `signal` aborts (the request's time
 * limit, or the reader leaving), git is killed and nothing more is written.
 */
export function serveGit(
  gitDir: string,
  service: string,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  query: string,
  signal?: AbortSignal,
): void {
  if (service === 'git-receive-pack' || /service=git-receive-pack/.test(query)) {
    res
      .writeHead(403, { 'content-type': 'text/plain' })
      .end('This appview is read-only: push with knotless://\n');
    return;
  }
  const child = spawn('git', ['http-backend'], {
    env: {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      GIT_PROJECT_ROOT: path.dirname(gitDir),
      GIT_HTTP_EXPORT_ALL: '1',
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_CONFIG_COUNT: '2',
      GIT_CONFIG_KEY_0: 'http.receivepack',
      GIT_CONFIG_VALUE_0: 'false',
      GIT_CONFIG_KEY_1: 'http.uploadpack',
      GIT_CONFIG_VALUE_1: 'true',
      REQUEST_METHOD: req.method ?? 'GET',
      PATH_INFO: `/${path.basename(gitDir)}/${service}`,
      QUERY_STRING: query,
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      REMOTE_ADDR: req.socket.remoteAddress ?? '',
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
  // git may stop reading its input early (a bad request, or killed): its exit status tells, not EPIPE.
  child.stdin.on('error', () => {});
  let head = Buffer.alloc(0);
  let headerDone = false;
  child.stdout.on('data', (chunk: Buffer) => {
    // Out of time: the 503 (or the cut) is the answer; git's late output goes nowhere.
    if (signal?.aborted === true) return;
    if (headerDone) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end === -1) return;
    headerDone = true;
    let status = 200;
    for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
      const colon = line.indexOf(':');
      const name = line.slice(0, colon).trim();
      const value = line.slice(colon + 1).trim();
      if (name.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
      else res.setHeader(name, value);
    }
    res.writeHead(status);
    res.write(head.subarray(end + 4));
  });
  child.stdout.on('end', () => {
    if (signal?.aborted === true) return;
    if (!headerDone) res.writeHead(500).end('git http-backend failed\n');
    else res.end();
  });
  child.on('error', () => res.destroy());
  res.on('close', () => child.kill());
}
