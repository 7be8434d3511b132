// What a request that got no usable answer becomes for the user: one sentence per kind of fault.
import { KnotlessError } from '../errors.ts';

/** A request that got no usable answer: refused, reset, timed out, or cut mid-body. */
export class NoAnswer extends Error {
  readonly url: URL;
  readonly code: string;
  /** The cap or time limit that was reached (ETOOLARGE: bytes, EDEADLINE: ms). */
  readonly limit: unknown;
  attempts = 1;

  constructor(url: URL, code: string, cause: unknown) {
    super(code, { cause });
    this.url = url;
    this.code = code;
    this.limit = (cause as { limit?: unknown } | undefined)?.limit;
  }
}

/** Faults that mean the request never reached the server: nothing it asked for can have happened. */
const NEVER_SENT = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ENOENT',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);

/** True for TLS faults: a certificate that is not trusted is no transient fault. */
export function isCertificateFault(code: string): boolean {
  return /CERT|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code);
}

/** The one sentence for a request that got no usable answer. */
export function unreachable(err: NoAnswer): KnotlessError {
  const { url, code } = err;
  const cause = err.cause;
  if (isCertificateFault(code)) {
    return new KnotlessError(
      'pds-unreachable',
      `${url.origin} presented a certificate that is not trusted (${code}); if you run that server, name its CA in KNOTLESS_CA_CERTS.`,
      { cause, reason: 'untrusted certificate' },
    );
  }
  const tries = err.attempts > 1 ? ` after ${err.attempts} attempts` : '';
  const unsure = !NEVER_SENT.has(code);
  const nsid = url.pathname.replace(/^\/xrpc\//, '');
  if (code === 'ETOOLARGE') {
    return new KnotlessError(
      'pds-error',
      `${url.origin} sent an answer to ${nsid} larger than the ${bytes(err.limit)} allowed for it, so it was cut off there; the server is misbehaving, tell its operator.`,
      { cause, reason: 'pds answer unreadable', unsure },
    );
  }
  if (code === 'EAGENTGONE') {
    return new KnotlessError(
      'pds-unreachable',
      `The warm agent stopped while forwarding ${nsid} to ${url.origin}; run the command again (it goes directly while no agent runs).`,
      { cause, unsure, agentGone: true },
    );
  }
  if (code === 'EDEADLINE') {
    const s = typeof err.limit === 'number' ? `${Math.round(err.limit / 1000)} s` : 'the time limit';
    return new KnotlessError(
      'pds-error',
      `${url.origin} did not finish its answer to ${nsid} within ${s}, so it was cut off; try again later, or raise KNOTLESS_HTTP_TIMEOUT on a slow link.`,
      { cause, reason: 'pds timed out', unsure },
    );
  }
  if (code === 'ETRUNCATED' || code === 'EBADANSWER' || code === 'HPE_INVALID') {
    return new KnotlessError(
      'pds-error',
      `${url.origin} sent answers cut short or unreadable (${code})${tries}; it may be failing, try again later.`,
      { cause, reason: 'pds answer unreadable', unsure },
    );
  }
  return new KnotlessError(
    'pds-unreachable',
    `Could not reach ${url.origin} (${code})${tries}; check your connection or the server's status, then try again.`,
    { cause, unsure },
  );
}

function bytes(n: unknown): string {
  if (typeof n !== 'number') return 'size';
  return n >= 1024 * 1024
    ? `${+(n / 1024 / 1024).toFixed(1)} MiB`
    : n >= 1024
      ? `${+(n / 1024).toFixed(1)} KiB`
      : `${n} bytes`;
}
