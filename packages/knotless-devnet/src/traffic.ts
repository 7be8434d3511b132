/** Writes other accounts make on a PDS while a test or benchmark runs, as on a real, busy PDS. */
export interface Traffic {
  /** Records written so far. */
  readonly writes: number;
  /** Stops every writer once its write in flight is answered; the total written. */
  stop(): Promise<number>;
}

async function call(
  pdsUrl: string,
  nsid: string,
  body: unknown,
  token?: string,
): Promise<Record<string, unknown>> {
  const res = await fetch(`${pdsUrl}/xrpc/${nsid}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${nsid} failed: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}

/**
 * Starts one writer per account, straight to the PDS (never through a counting proxy): each creates a
 * small record, waits `pauseMs`, and again, until stopped. The records are in a collection of their
 * own, so knotless has nothing to read in them; only the event stream carries them.
 */
export async function startTraffic(
  pdsUrl: string,
  accounts: Array<{ did: string; handle: string }>,
  password: string,
  opts: { pauseMs?: number } = {},
): Promise<Traffic> {
  const pause = opts.pauseMs ?? 0;
  let writes = 0;
  let stopped = false;
  let failure: Error | undefined;
  const sessions = await Promise.all(
    accounts.map(async (a) => {
      const s = await call(pdsUrl, 'com.atproto.server.createSession', { identifier: a.handle, password });
      return { did: a.did, token: String(s['accessJwt']) };
    }),
  );
  const workers = sessions.map(async ({ did, token }) => {
    while (!stopped) {
      await call(
        pdsUrl,
        'com.atproto.repo.createRecord',
        {
          repo: did,
          collection: 'dev.knotless.test.noise',
          record: { n: writes, at: new Date().toISOString() },
        },
        token,
      );
      writes++;
      if (pause > 0) await new Promise((r) => setTimeout(r, pause));
    }
  });
  // A writer that fails stops the others; stop() reports why.
  for (const w of workers)
    w.catch((err: unknown) => {
      failure ??= err instanceof Error ? err : new Error(String(err));
      stopped = true;
    });
  return {
    get writes() {
      return writes;
    },
    async stop() {
      stopped = true;
      await Promise.allSettled(workers);
      if (failure !== undefined) throw failure;
      return writes;
    },
  };
}
