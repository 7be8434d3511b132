import { spawn } from 'node:child_process';
import http from 'node:http';
import { listenOnFreePort } from './ports.ts';

/** A running `git http-backend` server: git's own smart HTTP, the peer knotless is measured against. */
export interface GitHttpServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

/**
 * Serves every repository under `root` with git's smart HTTP protocol (push enabled), by running
 * `git http-backend` as a CGI program per request on 127.0.0.1. No web server package is needed:
 * CGI is a process with an environment, a body on stdin and headers on stdout.
 */
export async function startGitHttp(root: string): Promise<GitHttpServer> {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const child = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env['PATH'] ?? '/usr/bin:/bin',
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        GIT_CONFIG_COUNT: '1',
        GIT_CONFIG_KEY_0: 'http.receivepack',
        GIT_CONFIG_VALUE_0: 'true',
        REQUEST_METHOD: req.method ?? 'GET',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        ...(req.headers['content-encoding'] === undefined
          ? {}
          : { HTTP_CONTENT_ENCODING: String(req.headers['content-encoding']) }),
        ...(req.headers['git-protocol'] === undefined
          ? {}
          : { GIT_PROTOCOL: String(req.headers['git-protocol']) }),
        REMOTE_USER: 'bench',
        REMOTE_ADDR: '127.0.0.1',
      },
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    req.pipe(child.stdin);
    let head = Buffer.alloc(0);
    let headerDone = false;
    child.stdout.on('data', (chunk: Buffer) => {
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
    child.stdout.on('end', () => res.end());
    child.on('error', () => res.destroy());
  });
  server.keepAliveTimeout = 90_000;
  const port = await listenOnFreePort(server);
  return {
    url: `http://127.0.0.1:${port}`,
    port: port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
