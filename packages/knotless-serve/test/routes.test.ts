// The appview's route table: every POST it takes declares the CSRF check and a signed-in reader (or
// is one of the few named exemptions, with its reason), and the one dispatcher enforces what a route
// declares before its handler runs, over real HTTP.

import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import type { Viewer } from '../src/auth/web-sessions.ts';
import { dispatch, matchPath, type Route } from '../src/web/route-table.ts';
import { ROUTES } from '../src/web/server.ts';
import { HttpError, type Site } from '../src/web/site.ts';
import { withViewer } from '../src/web/viewer.ts';

const takesPost = (r: Route): boolean => r.method === 'POST' || r.method === 'ANY';

/** The POSTs that are not a signed-in reader's form, each for the reason its route gives. */
const EXEMPT = [
  'ANY /-/img/*',
  'ANY /:owner/:repo/git-receive-pack',
  'ANY /:owner/:repo/git-upload-pack',
  'ANY /:owner/:repo/info/refs',
  'ANY /xrpc/*',
  'POST /-/signin',
  'POST /xrpc/dev.knotless.webhook.add',
  'POST /xrpc/dev.knotless.webhook.remove',
  'POST /xrpc/dev.knotless.webhook.test',
];

/** What the table walk finds wrong in `routes`, one sentence per route. */
function undeclared(routes: readonly Route[]): string[] {
  const wrong: string[] = [];
  for (const r of routes.filter(takesPost)) {
    const name = `${r.method} ${r.path}`;
    if (r.csrf === undefined) wrong.push(`${name} takes POST but declares no CSRF check`);
    else if (r.csrf !== true) {
      if (r.csrf.exempt.trim() === '') wrong.push(`${name} is exempt from CSRF without a reason`);
      if (!EXEMPT.includes(name)) wrong.push(`${name} is exempt from CSRF but is not a known exemption`);
    } else {
      if (r.signIn === undefined) wrong.push(`${name} writes but does not require sign-in`);
      if (r.form === undefined) wrong.push(`${name} checks a CSRF token but reads no form`);
    }
  }
  return wrong;
}

describe('the route table', () => {
  it('every POST route declares the CSRF check and sign-in, or is a named exemption', () => {
    assert.deepEqual(undeclared(ROUTES), []);
    const exempt = ROUTES.filter((r) => takesPost(r) && r.csrf !== true).map((r) => `${r.method} ${r.path}`);
    assert.deepEqual(exempt.sort(), EXEMPT);
    // The forms the pages post are in the table, so the walk covers them.
    for (const path of [
      '/-/signout',
      '/:owner/:repo/edit',
      '/:owner/:repo/star',
      '/:owner/:repo/pulls/:author/:rkey/merge',
    ])
      assert.ok(
        ROUTES.some((r) => r.method === 'POST' && r.path === path),
        path,
      );
  });

  it('the walk names a POST route that drops its CSRF check or its sign-in', () => {
    const star = ROUTES.find((r) => r.method === 'POST' && r.path === '/:owner/:repo/star')!;
    const { csrf: _c, ...noCsrf } = star;
    const { signIn: _s, ...noSignIn } = star;
    assert.deepEqual(undeclared([noCsrf]), ['POST /:owner/:repo/star takes POST but declares no CSRF check']);
    assert.deepEqual(undeclared([noSignIn]), ['POST /:owner/:repo/star writes but does not require sign-in']);
    assert.deepEqual(undeclared([{ ...star, csrf: { exempt: 'because' } }]), [
      'POST /:owner/:repo/star is exempt from CSRF but is not a known exemption',
    ]);
  });

  it('matches literal segments, :name segments and a trailing * of any length', () => {
    assert.deepEqual(matchPath('/:owner/:repo/tree/*', ['a', 'b', 'tree', 'main', 'x']), {
      params: { owner: 'a', repo: 'b' },
      tail: 'main/x',
    });
    assert.deepEqual(matchPath('/:owner/:repo/tree/*', ['a', 'b', 'tree']), {
      params: { owner: 'a', repo: 'b' },
      tail: '',
    });
    assert.equal(matchPath('/:owner/:repo', ['a', 'b', 'c']), undefined);
    assert.equal(matchPath('/-/signin', ['-', 'signout']), undefined);
    assert.deepEqual(matchPath('/', []), { params: {}, tail: '' });
  });
});

describe('the dispatcher', () => {
  const reader: Viewer = { did: 'did:plc:reader', handle: 'reader.test', csrf: 'the-token', idHash: 'h' };
  const ran: string[] = [];
  const table: Route[] = [
    {
      method: 'POST',
      path: '/-/act',
      answers: 'html',
      signIn: 'Sign in to act.',
      csrf: true,
      form: 1024,
      handle: ({ form, viewer }) => {
        ran.push(`${viewer?.did} ${form.get('x')}`);
        return 'done';
      },
    },
    { method: 'GET', path: '/-/page', answers: 'html', handle: () => 'page' },
  ];

  /** A real server answering from `table`, the request's reader taken from a test header. */
  async function serve<T>(work: (base: string) => Promise<T>): Promise<T> {
    const server = http.createServer((req, res) => {
      const signedIn = req.headers['x-test-reader'] === 'yes' ? reader : undefined;
      void withViewer(signedIn, true, 0, () => dispatch(table, {} as Site, req, res)).then(
        (body) => res.writeHead(200).end(body),
        (err: unknown) =>
          err instanceof HttpError
            ? res.writeHead(err.status).end(err.message)
            : res.writeHead(500).end(String(err)),
      );
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    try {
      return await work(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    } finally {
      await new Promise((ok) => server.close(ok));
    }
  }

  const post = (base: string, body: string, signedIn: boolean, type = 'application/x-www-form-urlencoded') =>
    fetch(`${base}/-/act`, {
      method: 'POST',
      headers: { 'content-type': type, ...(signedIn ? { 'x-test-reader': 'yes' } : {}) },
      body,
    }).then(async (r) => [r.status, await r.text()] as const);

  it("enforces a route's sign-in, form and CSRF token before its handler runs", async () => {
    await serve(async (base) => {
      assert.deepEqual(await post(base, 'x=1&csrf=the-token', false), [401, 'Sign in to act.']);
      assert.deepEqual(await post(base, 'x=1', true), [
        403,
        'This form did not come from a page of this site, or has expired; reload the page and try again.',
      ]);
      assert.deepEqual(await post(base, 'x=1&csrf=another', true), [
        403,
        'This form did not come from a page of this site, or has expired; reload the page and try again.',
      ]);
      assert.equal((await post(base, '{}', true, 'application/json'))[0], 415);
      assert.equal((await post(base, `x=${'a'.repeat(2000)}&csrf=the-token`, true))[0], 413);
      assert.deepEqual(ran, []);
      assert.deepEqual(await post(base, 'x=1&csrf=the-token', true), [200, 'done']);
      assert.deepEqual(ran, ['did:plc:reader 1']);
      // A POST no route takes is refused as an action would be, then not found.
      const unknown = await fetch(`${base}/-/nothing`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'csrf=the-token',
      });
      assert.equal(unknown.status, 401);
      const page = await fetch(`${base}/-/page`);
      assert.deepEqual([page.status, await page.text()], [200, 'page']);
      assert.equal((await fetch(`${base}/-/nowhere`)).status, 404);
      assert.equal((await fetch(`${base}/-/page`, { method: 'PUT' })).status, 405);
    });
  });
});
