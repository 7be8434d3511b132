import { REFS_COLLECTION } from 'knotless-core/records/collections';
import type { RateBudgets, UploadBudgets } from 'knotless-core/xrpc/rate-limit';
import type { HttpRequest, HttpResponse, Transport } from 'knotless-core/xrpc/transport';
import type { Follower } from './follower.ts';
import { budgetKey, refusalOf, type GroupCommit } from './group-commit.ts';
import { isWrite } from './socket-forward.ts';
import { landedTable } from './table-group.ts';

/**
 * The account a forwarded write was for (its body's `repo`), if it says; when it writes a ref table,
 * the CID of the table it swaps on, and the table (its key and record) it puts.
 */
function writeTarget(
  body: Buffer,
): { did: string; table?: string; put?: { rkey: string; record: unknown } } | undefined {
  try {
    const write = JSON.parse(body.toString('utf8')) as {
      repo?: unknown;
      collection?: unknown;
      rkey?: unknown;
      record?: unknown;
      swapRecord?: unknown;
    };
    if (typeof write.repo !== 'string') return undefined;
    if (write.collection !== REFS_COLLECTION) return { did: write.repo };
    return {
      did: write.repo,
      ...(typeof write.swapRecord === 'string' ? { table: write.swapRecord } : {}),
      ...(typeof write.rkey === 'string' && typeof write.record === 'object' && write.record !== null
        ? { put: { rkey: write.rkey, record: write.record } }
        : {}),
    };
  } catch (err) {
    // Not JSON: not a write of ours; nothing to drop.
    if (err instanceof SyntaxError) return undefined;
    throw err;
  }
}

/**
 * How a helper's request is sent on: a ref write into the account's next group commit, anything else
 * as it came. One function for both ways a helper reaches the agent (its socket's `POST /forward`,
 * and the calls of a helper the agent hosts), so that what a write found reaches the views the same
 * way: a write that failed (it may have landed) or was refused for anything but a swap or a rate
 * limit drops them; a refused swap marks the account behind. Every answer to a write also feeds the
 * account's write budget, and every answer what `uploads` knows of its PDS's budget for blob uploads
 * (a view passes that on to a push whose uploads may come before any read of its own).
 */
export function forwarder(
  transport: Transport,
  group: GroupCommit,
  budgets: RateBudgets,
  follower: Follower,
  uploads: UploadBudgets,
): (target: URL, init: HttpRequest) => Promise<HttpResponse> {
  const { views } = follower;
  return async (target, init) => {
    // A helper hosted here hands its body as it built it (JSON text), one over the socket as bytes.
    const { body } = init;
    const bytes =
      typeof body === 'string'
        ? Buffer.from(body, 'utf8')
        : body instanceof Uint8Array
          ? Buffer.from(body.buffer, body.byteOffset, body.byteLength)
          : undefined;
    const written = bytes !== undefined && isWrite(target.pathname) ? writeTarget(bytes) : undefined;
    const did = written?.did;
    let out: HttpResponse;
    let grouped: Promise<HttpResponse> | undefined;
    try {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(init.headers)) headers[k.toLowerCase()] = v;
      grouped =
        init.method === 'POST' && bytes !== undefined
          ? group.accept(target, headers, bytes, init.deadlineMs)
          : undefined;
      out = await (grouped ??
        transport.request(target, bytes?.length === 0 ? { ...init, body: null } : init));
    } catch (err) {
      // Whether it landed is unknown: the views of that account cannot be trusted any more.
      if (did !== undefined) follower.drop(views.drop({ did }), 'a write through the agent failed');
      throw err;
    }
    if (did !== undefined) budgets.observe(budgetKey(target, did), out.headers);
    const nsid = target.pathname.startsWith('/xrpc/') ? target.pathname.slice('/xrpc/'.length) : '';
    uploads.observe(target.origin, init.method, nsid, out.status, out.headers);
    // A table write the group did not take (an OAuth request, whose DPoP proof signs it as it came)
    // landed: the views take it now, as the group's own, so that the next push swaps on it rather
    // than on the table before, which the stream may not have replaced yet.
    if (grouped === undefined && written?.put !== undefined && target.pathname.endsWith('.putRecord')) {
      const change = landedTable(written.put.record, out);
      if (change !== undefined) await follower.tableLanded(written.did, written.put.rkey, change);
    }
    // A refused swap wrote nothing, and says only that the account moved on: the views follow
    // it as the stream delivers it. Any other refusal is not understood here, so they go.
    const refused = out.status >= 400 ? refusalOf(out) : undefined;
    if (refused === 'swap-conflict') {
      if (did !== undefined) follower.markBehind(did);
      if (did !== undefined && written?.table !== undefined) follower.markTableBehind(did, written.table);
    } else if (out.status >= 400 && did !== undefined && refused !== 'rate-limited')
      // A rate limit refuses before anything is done (xrpc/rate-limit.ts): nothing moved, the views hold.
      follower.drop(views.drop({ did }), `a write through the agent was refused (${out.status})`);
    return out;
  };
}
