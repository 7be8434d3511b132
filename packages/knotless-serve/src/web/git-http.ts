import type http from 'node:http';
import path from 'node:path';
import { serveHttpBackend } from 'knotless-core';

/**
 * Serves one mirror read-only over git's smart HTTP protocol (knotless's `git http-backend` bridge).
 * Pushes are refused before git is started; http-backend would refuse them too, as receive-pack is
 * off. When `signal` aborts (the request's time limit, or the reader leaving), git is killed and
 * nothing more is written.
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
  serveHttpBackend(req, res, {
    projectRoot: path.dirname(gitDir),
    pathInfo: `/${path.basename(gitDir)}/${service}`,
    query,
    receivePack: false,
    ...(signal === undefined ? {} : { signal }),
  });
}
