import type http from 'node:http';

/** A listening HTTP server that can be closed, dropping keep-alive connections. */
export interface Listening {
  server: http.Server;
  close(): Promise<void>;
}

/** The part of an express application that serving needs. */
export interface App {
  listen(port: number, host: string, onListening: () => void): http.Server;
}

/**
 * Serves an express app on 127.0.0.1 only. The PLC's and PDS's own `start()` bind every interface,
 * and a dev PDS with a published password must not be reachable from the LAN.
 */
export async function listenLoopback(app: App, port: number): Promise<Listening> {
  const server = await new Promise<http.Server>((resolve, reject) => {
    const s = app.listen(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
  server.keepAliveTimeout = 90_000;
  return {
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
