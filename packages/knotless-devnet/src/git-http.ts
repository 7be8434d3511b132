import http from 'node:http';
import { serveHttpBackend } from 'knotless-core';
import { listenOnFreePort } from './ports.ts';

/** A running `git http-backend` server: git's own smart HTTP, the peer knotless is measured against. */
export interface GitHttpServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

/**
 * Serves every repository under `root` with git's smart HTTP protocol (push enabled) on 127.0.0.1,
 * through the same `git http-backend` bridge as the appview's clones.
 */
export async function startGitHttp(root: string): Promise<GitHttpServer> {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    serveHttpBackend(req, res, {
      projectRoot: root,
      pathInfo: decodeURIComponent(url.pathname),
      query: url.search.slice(1),
      receivePack: true,
      remoteUser: 'bench',
    });
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
