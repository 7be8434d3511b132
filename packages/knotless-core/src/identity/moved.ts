/** An account that left the PDS a session was made on: both PDSes, as origins (scheme, host, port). */
export interface AccountMove {
  /** The PDS that made the session (the one its tokens mean something to). */
  from: string;
  /** The PDS the account's DID document names now. */
  to: string;
}

/**
 * The one test of "the account moved": the PDS a session was made on against the one its DID
 * document names now, compared by origin (a trailing slash or path is no move). Undefined when they
 * are the same, or when where it lives now is unknown: a move is only said when it is known. Each
 * front end words the sentence its own way (log in again, sign in again).
 */
export function accountMove(sessionPds: string, pdsNow: string | undefined): AccountMove | undefined {
  if (pdsNow === undefined) return undefined;
  const from = new URL(sessionPds).origin;
  const to = new URL(pdsNow).origin;
  return from === to ? undefined : { from, to };
}
