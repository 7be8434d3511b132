// Time limits and README images on a real appview fed by a real PDS: a page or a clone past its
// limit gets a 503 and the git process working for it is killed; README images from other hosts
// reach the reader only through the appview's signed proxy, which refuses private addresses (outside
// dev mode), non-images, oversized and slow answers.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { ImageProxy } from '../src/web/images.ts';
import { appviewOn, get, waitFor, xrpc } from './helpers.ts';

const t = useNetwork(['alice.test']);
const alice = useGitUser(t, 'alice.test');

const PNG = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.alloc(64, 1)]);
const SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script></svg>';
const MAX_IMAGE = 64 * 1024;

/** A loopback host serving the images a README names, counting what it is asked for. */
async function imageHost(): Promise<{ server: http.Server; port: number; hits: string[] }> {
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    switch (req.url) {
      case '/badge.svg':
        return void res.writeHead(200, { 'content-type': 'image/svg+xml' }).end(SVG);
      case '/shot.png':
        return void res.writeHead(200, { 'content-type': 'image/png' }).end(PNG);
      case '/page.png':
        return void res.writeHead(200, { 'content-type': 'text/html' }).end('<script>alert(1)</script>');
      case '/big.png':
        // No length announced: the proxy must count.
        res.writeHead(200, { 'content-type': 'image/png' });
        return void res.end(Buffer.alloc(MAX_IMAGE * 2));
      case '/slow.png': {
        res.writeHead(200, { 'content-type': 'image/png' });
        const timer = setInterval(() => res.write(Buffer.alloc(1)), 100);
        return void res.on('close', () => clearInterval(timer));
      }
      case '/moved.png':
        return void res.writeHead(302, { location: '/shot.png' }).end();
      default:
        return void res.writeHead(404).end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port, hits };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A page of this appview once it answered in time. Its time limits are made short for the tests of
 * them below; on a loaded machine a page may pass one and answer 503, which those tests cover: the
 * tests of what a page shows wait for an answer that is the page.
 */
async function shown(url: string): Promise<Response> {
  return waitFor(`${url} within its time limit`, async () => {
    const res = await fetch(url);
    if (res.status !== 503) return res;
    await res.arrayBuffer();
    return undefined;
  });
}

/** Every <img src> of a page. */
function imgSources(page: string): string[] {
  return [...page.matchAll(/<img [^>]*src="([^"]*)"/g)].map((m) => m[1]!.replace(/&amp;/g, '&'));
}

describe('appview limits and README images', () => {
  let app: Appview;
  let host: Awaited<ReturnType<typeof imageHost>>;
  let marks: string;
  const savedPath = process.env['PATH'];
  before(async () => {
    await t.ready;
    host = await imageHost();
    // A `git` first on PATH that records its pid and, when told by a marker file, hangs instead of
    // running: a real slow process for the time limit to kill.
    marks = t.tmpdir();
    const realGit = execFileSync('sh', ['-c', 'command -v git']).toString().trim();
    fs.writeFileSync(
      path.join(marks, 'git'),
      `#!/bin/sh\necho $$ > "${marks}/$1.pid"\n` +
        `if [ -f "${marks}/slow-$1" ]; then exec sleep 60; fi\nexec "${realGit}" "$@"\n`,
      { mode: 0o755 },
    );
    process.env['PATH'] = `${marks}:${savedPath ?? '/usr/bin:/bin'}`;
    app = await appviewOn(t, ':memory:', undefined, {
      requestTimeoutMs: 1500,
      gitTimeoutMs: 1500,
      imageTimeoutMs: 1000,
      imageMaxBytes: MAX_IMAGE,
    });
    assert.equal((await alice.knotless('repo', 'create', 'pics')).code, 0);
    const work = await newRepo(alice, 'knotless://alice.test/pics');
    const base = `http://127.0.0.1:${host.port}`;
    const readme = [
      '# pics',
      `![badge](${base}/badge.svg) ![shot](${base}/shot.png) ![moved](${base}/moved.png)`,
      `![page](${base}/page.png) ![big](${base}/big.png) ![slow](${base}/slow.png)`,
      `![schemeless](//127.0.0.1:${host.port}/shot.png?x=1) ![local](docs/local.png)`,
      `[a link](${base}/linked)`,
    ].join('\n\n');
    const files = {
      'README.md': readme + '\n',
      'docs/local.png': PNG,
      'docs/fake.png': '<svg onload="alert(1)">\n',
      'sub/README.md': '![up](../docs/local.png) ![root](/docs/fake.png)\n',
    };
    await commitFiles(alice, work, files, 'readme');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    await waitFor('the mirror', async () => {
      const r = await xrpc<{ refs: unknown[] }>(app, 'dev.knotless.getRepo', {
        actor: 'alice.test',
        repo: 'pics',
      });
      return r.refs.length > 0 ? true : undefined;
    });
    await app.idle();
  });
  after(async () => {
    process.env['PATH'] = savedPath;
    await app?.close();
    host?.server.closeAllConnections();
    await new Promise<void>((r) => host?.server.close(() => r()));
  });

  it('never names another host in an <img src>; the page allows images from itself only', async () => {
    const res = await shown(`${app.url}/alice.test/pics`);
    const page = await res.text();
    assert.equal(res.status, 200);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /img-src 'self';/);
    assert.doesNotMatch(csp, /img-src[^;]*(https:|data:|\*)/);
    const srcs = imgSources(page);
    assert.equal(srcs.length, 8, page);
    for (const src of srcs) {
      assert.ok(!src.includes('127.0.0.1') && !src.startsWith('//') && !/^[a-z]+:/i.test(src), src);
    }
    assert.equal(srcs.filter((s) => s.startsWith('/-/img/')).length, 7);
    assert.ok(page.includes(`http://127.0.0.1:${host.port}/linked`), 'links still name their host');
    assert.deepEqual(host.hits, [], 'rendering the page fetched nothing');
  });

  it('serves proxied images inert, and refuses non-images, oversized and slow answers', async () => {
    const page = await (await shown(`${app.url}/alice.test/pics`)).text();
    const [badge, shot, moved, html, big, slow, schemeless] = imgSources(page).filter((s) =>
      s.startsWith('/-/img/'),
    ) as [string, string, string, string, string, string, string];

    const svg = await fetch(app.url + badge);
    assert.equal(svg.status, 200);
    assert.equal(svg.headers.get('content-type'), 'image/svg+xml');
    assert.match(svg.headers.get('content-security-policy') ?? '', /sandbox/);
    assert.equal(svg.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(await svg.text(), SVG);
    // `//host/x` takes the page's scheme; the appview assumes https, as it is served in production.
    const decoded = Buffer.from(schemeless.split('/')[4]!, 'base64url').toString('utf8');
    assert.equal(decoded, `https://127.0.0.1:${host.port}/shot.png?x=1`);
    for (const src of [shot, moved]) {
      const png = await fetch(app.url + src);
      assert.equal(png.status, 200, src);
      assert.deepEqual(Buffer.from(await png.arrayBuffer()), PNG);
    }
    const hits = host.hits.length;
    assert.equal((await fetch(app.url + shot)).status, 200);
    assert.equal(host.hits.length, hits, 'a second view is answered from the cache');

    const notImage = await get(app.url + html);
    assert.equal(notImage.status, 502);
    assert.match(notImage.text, /not an image \(text\/html\)/);
    const tooBig = await get(app.url + big);
    assert.equal(tooBig.status, 502);
    assert.match(tooBig.text, /larger than 65536 bytes/);
    const started = Date.now();
    const tooSlow = await get(app.url + slow);
    assert.equal(tooSlow.status, 502);
    // The image's own limit stopped it (the request's would answer 503, "took longer than 1.5 s").
    assert.match(tooSlow.text, /longer than 1000 ms/);
    assert.ok(Date.now() - started >= 1000, 'not before its limit');
  });

  it("shows the repository's own images from its raw files, as images only when they are", async () => {
    const root = imgSources(await (await shown(`${app.url}/alice.test/pics`)).text());
    assert.ok(root.includes('/alice.test/pics/raw/main/docs/local.png'), root.join(' '));
    const sub = imgSources(await (await shown(`${app.url}/alice.test/pics/tree/main/sub`)).text());
    assert.deepEqual(sub, [
      '/alice.test/pics/raw/main/docs/local.png',
      '/alice.test/pics/raw/main/docs/fake.png',
    ]);
    const png = await fetch(`${app.url}/alice.test/pics/raw/main/docs/local.png`);
    assert.equal(png.headers.get('content-type'), 'image/png');
    assert.match(png.headers.get('content-security-policy') ?? '', /sandbox/);
    assert.deepEqual(Buffer.from(await png.arrayBuffer()), PNG);
    // Named .png but not one: plain text, never an image or markup.
    const fake = await fetch(`${app.url}/alice.test/pics/raw/main/docs/fake.png`);
    assert.equal(fake.headers.get('content-type'), 'text/plain; charset=utf-8');
  });

  it('is not an open proxy: an address it did not sign is refused', async () => {
    const page = await (await shown(`${app.url}/alice.test/pics`)).text();
    const shot = imgSources(page).find((s) => s.startsWith('/-/img/'))!;
    const [, , , sig] = shot.split('/');
    const other = Buffer.from(`http://127.0.0.1:${host.port}/big.png`).toString('base64url');
    const hits = host.hits.length;
    assert.equal((await get(`${app.url}/-/img/${sig}/${other}`)).status, 403);
    assert.equal((await get(`${app.url}/-/img/AAAA/${other}`)).status, 403);
    assert.equal(host.hits.length, hits);
  });

  it('outside dev mode refuses images on private addresses, without connecting', async () => {
    const proxy = new ImageProxy({
      key: Buffer.alloc(32, 7),
      dev: false,
      maxBytes: MAX_IMAGE,
      timeoutMs: 1000,
      log: (line) => assert.fail(`unexpected log line: ${line}`),
    });
    const server = http.createServer((req, res) => {
      void proxy.serve((req.url ?? '').slice('/-/img/'.length), res, undefined);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const hits = host.hits.length;
      for (const remote of [
        `http://127.0.0.1:${host.port}/shot.png`,
        `http://localhost:${host.port}/shot.png`,
        `http://[::ffff:127.0.0.1]:${host.port}/shot.png`,
        `http://10.0.0.1/shot.png`,
        `http://169.254.169.254/latest/meta-data`,
      ]) {
        const res = await get(base + proxy.url(remote));
        assert.equal(res.status, 502, remote);
        assert.equal(res.text, 'The image could not be shown: its host is not a public address.\n', remote);
      }
      assert.equal(host.hits.length, hits, 'the loopback host was never contacted');
    } finally {
      proxy.close();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('answers a page past its time limit with 503 and kills the git working for it', async () => {
    // Blame of a file not blamed before: its git work is not cached yet (a killed one never is).
    fs.writeFileSync(path.join(marks, 'slow-blame'), '');
    fs.rmSync(path.join(marks, 'blame.pid'), { force: true });
    try {
      const started = Date.now();
      const res = await get(`${app.url}/alice.test/pics/blame/main/README.md`);
      const took = Date.now() - started;
      assert.equal(res.status, 503);
      assert.match(res.text, /took longer than 1\.5 s/);
      // Not before its limit; how long after depends on the machine (the test's own timeout is the bound).
      assert.ok(took >= 1400, `answered after ${took} ms`);
      const pid = Number(fs.readFileSync(path.join(marks, 'blame.pid'), 'utf8'));
      await waitFor('the slow git to be killed', () => Promise.resolve(isAlive(pid) ? undefined : true));
    } finally {
      fs.rmSync(path.join(marks, 'slow-blame'));
    }
    assert.equal(
      (await get(`${app.url}/alice.test/pics/blame/main/README.md`)).status,
      200,
      'later requests are unaffected',
    );
  });

  it('stops an archive download past its time limit and kills git archive', async () => {
    fs.writeFileSync(path.join(marks, 'slow-archive'), '');
    fs.rmSync(path.join(marks, 'archive.pid'), { force: true });
    try {
      const res = await get(`${app.url}/alice.test/pics/archive/main.tar.gz`);
      assert.equal(res.status, 503);
      assert.match(res.text, /took longer than 1\.5 s/);
      const pid = Number(fs.readFileSync(path.join(marks, 'archive.pid'), 'utf8'));
      await waitFor('git archive to be killed', () => Promise.resolve(isAlive(pid) ? undefined : true));
    } finally {
      fs.rmSync(path.join(marks, 'slow-archive'));
    }
    const ok = await fetch(`${app.url}/alice.test/pics/archive/main.tar.gz`);
    assert.equal(ok.status, 200);
    assert.deepEqual([...Buffer.from(await ok.arrayBuffer()).subarray(0, 2)], [0x1f, 0x8b], 'gzip');
  });

  it('stops a smart-HTTP request past its limit and kills git http-backend', async () => {
    fs.rmSync(path.join(marks, 'http-backend.pid'), { force: true });
    // A client that starts an upload-pack request and never finishes sending it.
    const url = new URL(`${app.url}/alice.test/pics/git-upload-pack`);
    const req = http.request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-git-upload-pack-request' },
    });
    req.write('0032want ');
    const started = Date.now();
    const outcome = await new Promise<string>((resolve) => {
      req.on('response', (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => (body += c));
        res.on('end', () => resolve(`${res.statusCode} ${body}`));
        res.on('error', () => resolve(`${res.statusCode} cut`));
      });
      req.on('error', (err) => resolve(`error ${err.message}`));
    });
    const took = Date.now() - started;
    // http-backend sends its headers before reading the request, so the answer has begun: the
    // connection is cut (a 503 when it had not begun).
    assert.match(outcome, /^(503 This request took longer than 1\.5 s|200 cut)/);
    assert.ok(took >= 1400, `answered after ${took} ms`);
    const pid = Number(fs.readFileSync(path.join(marks, 'http-backend.pid'), 'utf8'));
    await waitFor('git http-backend to be killed', () => Promise.resolve(isAlive(pid) ? undefined : true));
  });
});
