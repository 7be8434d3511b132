// A repository's webhooks over XRPC, for `knotless webhook`: each call carries atproto service
// auth, a JWT the caller's PDS signed (com.atproto.server.getServiceAuth) with this appview's DID
// as its audience and the method as its `lxm`, checked by @atproto/xrpc-server's verifyJwt against
// the #atproto key of the caller's DID document. The caller is the issuer: only their own
// repositories' webhooks are theirs to manage.
import type http from 'node:http';
import { verifyJwt, XRPCError } from '@atproto/xrpc-server';
import { serviceDidOf } from 'knotless-core/identity/service-did';
import type { WebhookMethod } from 'knotless-core/records/collections';
import { webhookTarget } from '../../webhooks/target.ts';
import type { Route } from '../route-table.ts';
import type { Site } from '../site.ts';
import { XrpcHttpError } from './common.ts';

/** The appview's own DID, the audience its service-auth tokens must name (the core's rule). */
function appviewDid(site: Site): string {
  return serviceDidOf(site.publicUrl);
}

/** The account a request's service-auth token proves, for the method `lxm`; 401 otherwise. */
async function caller(site: Site, req: http.IncomingMessage, lxm: string): Promise<string> {
  const auth = req.headers.authorization ?? '';
  const m = /^Bearer (\S+)$/.exec(auth);
  if (m === null)
    throw new XrpcHttpError(401, 'AuthRequired', 'Managing webhooks needs service auth from your PDS.');
  try {
    const payload = await verifyJwt(m[1]!, appviewDid(site), lxm, (iss, forceRefresh) =>
      site.identities.idResolver.did.resolveAtprotoKey(iss.split('#')[0]!, forceRefresh),
    );
    return payload.iss.split('#')[0]!;
  } catch (err) {
    if (err instanceof XRPCError)
      throw new XrpcHttpError(401, 'AuthRequired', `The service-auth token was refused: ${err.message}`);
    throw err;
  }
}

async function body(req: http.IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > 16 * 1024) throw new XrpcHttpError(413, 'PayloadTooLarge', 'The request is too large.');
    chunks.push(c);
  }
  try {
    const v = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch (err) {
    if (!(err instanceof SyntaxError)) throw err;
  }
  throw new XrpcHttpError(400, 'InvalidRequest', 'The request body is not a JSON object.');
}

function str(v: Record<string, unknown> | URLSearchParams, name: string): string {
  const x = v instanceof URLSearchParams ? v.get(name) : v[name];
  if (typeof x !== 'string' || x === '')
    throw new XrpcHttpError(400, 'InvalidRequest', `${name} is required`);
  return x;
}

/** The caller's own repository named `repo`. */
async function ownRepo(site: Site, did: string, name: string): Promise<string> {
  if ((await site.index.repo(did, name)) === undefined)
    throw new XrpcHttpError(400, 'RepoNotFound', `You have no repository ${name} known here.`);
  return name;
}

type Handler = (
  site: Site,
  did: string,
  input: Record<string, unknown> | URLSearchParams,
) => Promise<unknown>;

const METHODS: Record<WebhookMethod, { method: 'GET' | 'POST'; run: Handler }> = {
  'dev.knotless.webhook.list': {
    method: 'GET',
    async run(site, did, input) {
      const repo = await ownRepo(site, did, str(input, 'repo'));
      const hooks = await site.index.webhooks.list(did, repo);
      return {
        webhooks: await Promise.all(
          hooks.map(async (h) => {
            const [last] = await site.index.webhooks.deliveries(h.id, 1);
            return {
              id: h.id,
              url: h.url,
              createdAt: h.created_at,
              ...(last === undefined
                ? {}
                : {
                    lastDelivery: {
                      event: last.event,
                      state: last.state,
                      status: last.log[0]?.status ?? null,
                    },
                  }),
            };
          }),
        ),
      };
    },
  },
  'dev.knotless.webhook.add': {
    method: 'POST',
    async run(site, did, input) {
      const repo = await ownRepo(site, did, str(input, 'repo'));
      const target = await webhookTarget(str(input, 'url'), site.dev);
      if ('refused' in target) throw new XrpcHttpError(400, 'InvalidUrl', target.refused);
      const secret = (input as Record<string, unknown>)['secret'];
      if (secret !== undefined && (typeof secret !== 'string' || secret === '' || secret.length > 256))
        throw new XrpcHttpError(400, 'InvalidRequest', 'A secret is 1 to 256 characters.');
      const h = await site.index.webhooks.add(did, repo, target.url, secret);
      return { id: h.id, url: h.url, secret: h.secret, createdAt: h.created_at };
    },
  },
  'dev.knotless.webhook.remove': {
    method: 'POST',
    async run(site, did, input) {
      const repo = await ownRepo(site, did, str(input, 'repo'));
      if (!(await site.index.webhooks.remove(did, repo, str(input, 'id'))))
        throw new XrpcHttpError(400, 'WebhookNotFound', 'That repository has no such webhook.');
      return {};
    },
  },
  'dev.knotless.webhook.test': {
    method: 'POST',
    async run(site, did, input) {
      const repo = await ownRepo(site, did, str(input, 'repo'));
      const hook = await site.index.webhooks.get(did, repo, str(input, 'id'));
      if (hook === undefined)
        throw new XrpcHttpError(400, 'WebhookNotFound', 'That repository has no such webhook.');
      const delivery = await site.index.webhooks.ping(hook);
      site.webhooks?.wake();
      return { delivery };
    },
  },
};

function send(res: http.ServerResponse, status: number, out: unknown): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(out));
}

export const webhookXrpcRoutes: Route[] = Object.entries(METHODS).map(([nsid, m]) => ({
  method: m.method,
  path: `/xrpc/${nsid}`,
  answers: 'json',
  ...(m.method === 'POST'
    ? { csrf: { exempt: "service auth: a JWT the caller's PDS signed for this appview and this method" } }
    : {}),
  async handle({ site, req, res, url }) {
    try {
      const did = await caller(site, req, nsid);
      const input = m.method === 'GET' ? url.searchParams : await body(req);
      send(res, 200, await m.run(site, did, input));
    } catch (err) {
      if (err instanceof XrpcHttpError)
        return void send(res, err.status, { error: err.error, message: err.message });
      site.log(`xrpc ${nsid}: ${String(err)}`);
      send(res, 500, { error: 'InternalServerError', message: 'internal error' });
    }
    return undefined;
  },
}));
