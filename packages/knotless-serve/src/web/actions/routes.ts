// Every POST the appview takes, as routes of its table: a form (no JavaScript needed), from a
// signed-in reader, carrying the session's CSRF token (all declared here, enforced by the table's
// dispatcher). A refusal is one sentence with its status: 401 signed out, 403 a form that did not
// come from this site's page.
import { MAX_FORM_BYTES, SIGN_IN_TO_ACT, signedIn, type Route } from '../route-table.ts';
import { newFeed } from '../pages/notifications.ts';
import { EDIT_FORM_BYTES, editFile } from './edit.ts';
import { forgeRoutes } from './forge.ts';
import { signOut, startSignIn } from './sign-in.ts';
import { webhookRoutes } from './webhooks.ts';

export const actionRoutes: Route[] = [
  {
    method: 'POST',
    path: '/-/signin',
    answers: 'html',
    // Nobody is signed in yet, so there is no session whose token the form could carry.
    csrf: { exempt: 'signing in begins the session the token belongs to' },
    form: MAX_FORM_BYTES,
    handle: async ({ site, form, res }) => void (await startSignIn(site, form, res)),
  },
  {
    method: 'POST',
    path: '/-/signout',
    answers: 'html',
    signIn: SIGN_IN_TO_ACT,
    csrf: true,
    form: MAX_FORM_BYTES,
    handle: async (ctx) => void (await signOut(ctx.site, signedIn(ctx), ctx.res)),
  },
  {
    method: 'POST',
    path: '/-/notifications/feed',
    answers: 'html',
    signIn: SIGN_IN_TO_ACT,
    csrf: true,
    form: MAX_FORM_BYTES,
    handle: ({ site }) => newFeed(site),
  },
  {
    method: 'POST',
    path: '/:owner/:repo/edit',
    answers: 'html',
    signIn: SIGN_IN_TO_ACT,
    csrf: true,
    // A file's edit may be as large as its text's worst URL encoding.
    form: EDIT_FORM_BYTES,
    handle: async (ctx) =>
      void (await editFile(ctx.site, signedIn(ctx), await ctx.repo(), ctx.form, ctx.res)),
  },
  ...forgeRoutes,
  ...webhookRoutes,
];
