// The one `git http-backend` bridge (the appview's clones, the dev network's peer): how it reads the
// CGI answer's header block, and git's own statuses through it. Pushes through it are in
// knotless-devnet's git-http.test.ts; its time limit killing git in knotless-serve's limits.test.ts.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { parseCgiHead, serveHttpBackend } from 'knotless-core/git/http-backend';

describe('git http-backend bridge', () => {
  it("takes the status from CGI's Status header and passes the others", () => {
    assert.deepEqual(parseCgiHead('Status: 404 Not Found\r\nContent-Type: text/plain\r\nExpires: 0'), {
      status: 404,
      headers: [
        ['Content-Type', 'text/plain'],
        ['Expires', '0'],
      ],
    });
    assert.deepEqual(parseCgiHead('Content-Type: application/x-git-upload-pack-advertisement'), {
      status: 200,
      headers: [['Content-Type', 'application/x-git-upload-pack-advertisement']],
    });
    // A line without a name, or a status that is not one, changes nothing.
    assert.deepEqual(parseCgiHead('garbage\r\n: empty\r\nStatus: abc'), { status: 200, headers: [] });
  });

  it('answers info/refs of a bare repository, and 404 for a missing one', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-http-backend-'));
    execFileSync('git', ['init', '-q', '--bare', path.join(root, 'r.git')]);
    const server = http.createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      serveHttpBackend(req, res, {
        projectRoot: root,
        pathInfo: url.pathname,
        query: url.search.slice(1),
        receivePack: false,
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const refs = await fetch(`${base}/r.git/info/refs?service=git-upload-pack`);
      assert.equal(refs.status, 200);
      assert.equal(refs.headers.get('content-type'), 'application/x-git-upload-pack-advertisement');
      assert.match(await refs.text(), /^001e# service=git-upload-pack\n/);
      const push = await fetch(`${base}/r.git/info/refs?service=git-receive-pack`);
      assert.equal(push.status, 403, 'receive-pack is off');
      await push.arrayBuffer();
      const missing = await fetch(`${base}/none.git/info/refs?service=git-upload-pack`);
      assert.equal(missing.status, 404);
      await missing.arrayBuffer();
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
