import type http from 'node:http';

/** The PDSes the read API answers from, and whether listReposByCollection is offered. */
interface ReadApiSource {
  pdses: string[];
  withoutByCollection?: boolean;
}

interface RepoRow {
  did: string;
  head: string;
  rev: string;
  active: boolean;
  status?: string;
  pds: string;
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function query<T>(pds: string, nsid: string, params: Record<string, string>): Promise<T> {
  const res = await fetch(`${pds}/xrpc/${nsid}?${new URLSearchParams(params).toString()}`);
  if (!res.ok) throw new Error(`${pds} ${nsid}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** Every account of every PDS, by DID. A dev network holds a handful: each request reads them all. */
async function allRepos(pdses: string[]): Promise<RepoRow[]> {
  const rows: RepoRow[] = [];
  for (const pds of pdses) {
    let cursor: string | undefined;
    do {
      const page = await query<{ repos: Omit<RepoRow, 'pds'>[]; cursor?: string }>(
        pds,
        'com.atproto.sync.listRepos',
        { limit: '1000', ...(cursor === undefined ? {} : { cursor }) },
      );
      for (const r of page.repos) rows.push({ ...r, pds });
      cursor = page.repos.length > 0 ? page.cursor : undefined;
    } while (cursor !== undefined);
  }
  return rows.sort((a, b) => (a.did < b.did ? -1 : a.did > b.did ? 1 : 0));
}

/** One page of rows after `cursor` (a DID: rows are sorted by it). */
function page<T extends { did: string }>(rows: T[], url: URL): { rows: T[]; cursor?: string } {
  const limit = Math.min(Math.max(Number(url.searchParams.get('limit') ?? 500) || 500, 1), 2000);
  const after = url.searchParams.get('cursor') ?? '';
  const from = rows.filter((r) => r.did > after);
  const taken = from.slice(0, limit);
  return taken.length < from.length ? { rows: taken, cursor: taken.at(-1)!.did } : { rows: taken };
}

/**
 * Answers com.atproto.sync.listRepos, listReposByCollection and getRepoStatus from the PDSes, the
 * way a relay answers them from its own copy. 404 for anything else, as for an unknown method.
 */
export async function answerReadApi(
  src: ReadApiSource,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://relay');
  switch (url.pathname) {
    case '/xrpc/com.atproto.sync.listRepos': {
      const p = page(await allRepos(src.pdses), url);
      const repos = p.rows.map(({ pds: _pds, ...r }) => r);
      return json(res, 200, { repos, ...(p.cursor === undefined ? {} : { cursor: p.cursor }) });
    }
    case '/xrpc/com.atproto.sync.listReposByCollection': {
      if (src.withoutByCollection === true)
        return json(res, 501, { error: 'MethodNotImplemented', message: 'Method Not Implemented' });
      const collection = url.searchParams.get('collection');
      if (collection === null || collection === '')
        return json(res, 400, { error: 'InvalidRequest', message: 'collection is required' });
      const having: { did: string }[] = [];
      for (const r of await allRepos(src.pdses)) {
        if (!r.active) continue;
        const d = await query<{ collections: string[] }>(r.pds, 'com.atproto.repo.describeRepo', {
          repo: r.did,
        });
        if (d.collections.includes(collection)) having.push({ did: r.did });
      }
      const p = page(having, url);
      return json(res, 200, { repos: p.rows, ...(p.cursor === undefined ? {} : { cursor: p.cursor }) });
    }
    case '/xrpc/com.atproto.sync.getRepoStatus': {
      const did = url.searchParams.get('did');
      const row = (await allRepos(src.pdses)).find((r) => r.did === did);
      if (row === undefined)
        return json(res, 400, { error: 'RepoNotFound', message: `Could not find repo: ${did}` });
      return json(res, 200, {
        did: row.did,
        active: row.active,
        ...(row.status === undefined ? {} : { status: row.status }),
        ...(row.active ? { rev: row.rev } : {}),
      });
    }
    default:
      return json(res, 404, { error: 'MethodNotImplemented', message: 'Method Not Implemented' });
  }
}
