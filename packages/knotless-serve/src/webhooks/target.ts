// Where a webhook may post: the rule the settings page and the XRPC method both apply when one is
// added. Delivery applies the address guard again at every connection (the agents' lookup), since
// a name can resolve elsewhere later.
import dns from 'node:dns/promises';
import { AddressRefused, checkAddresses, checkUrl } from '../net/guard.ts';

/** Longest address kept. */
const MAX_URL = 2000;

/**
 * The webhook address `raw` as kept, or a sentence saying why it is refused: only http(s), no
 * user or password in it, and outside dev mode only a public address (every address its name
 * resolves to is checked now, and again when a delivery connects).
 */
export async function webhookTarget(
  raw: string,
  dev: boolean,
): Promise<{ url: string } | { refused: string }> {
  const text = raw.trim();
  let url: URL;
  try {
    url = new URL(text);
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
    return { refused: 'That is not a URL; give the receiver’s address as http(s)://host/path.' };
  }
  if (text.length > MAX_URL) return { refused: `That address is longer than ${MAX_URL} characters.` };
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { refused: 'A webhook posts over http or https only; give an http(s):// address.' };
  if (url.username !== '' || url.password !== '')
    return { refused: 'A webhook address may not carry a user or password; the secret signs each delivery.' };
  try {
    checkUrl(url, dev);
    if (!dev) {
      const host = url.hostname.replace(/^\[|\]$/g, '');
      checkAddresses(host, await dns.lookup(host, { all: true }));
    }
  } catch (err) {
    if (err instanceof AddressRefused)
      return {
        refused: `That address is not public (${err.message}); a webhook may only post to public addresses.`,
      };
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'ENODATA')
      return { refused: `${url.hostname} does not resolve; check the address.` };
    throw err;
  }
  return { url: url.toString() };
}
