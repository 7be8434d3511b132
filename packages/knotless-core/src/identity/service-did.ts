/**
 * The DID of a service known by its public URL (the appview): did:web of its host, the audience a
 * service-auth token for it must name. atproto allows a port in a did:web for localhost only, so a
 * service on loopback is `did:web:localhost%3A<port>` and elsewhere the port is dropped. The appview
 * checks tokens against this DID and the CLI asks its PDS for tokens naming it: one rule for both.
 */
export function serviceDidOf(publicUrl: string): string {
  const u = new URL(publicUrl);
  const loopback = ['127.0.0.1', 'localhost', '[::1]'].includes(u.hostname);
  return loopback ? `did:web:localhost${u.port === '' ? '' : `%3A${u.port}`}` : `did:web:${u.hostname}`;
}
