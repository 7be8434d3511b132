// The signed-in reader of the request being answered travels with its async context, as its
// signal does (deadline.ts): the page layout shows who is signed in, and every form takes its CSRF
// token from here, without threading the reader through every page function.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Viewer } from '../auth/web-sessions.ts';

const current = new AsyncLocalStorage<{ viewer: Viewer | undefined; signIn: boolean }>();

/** Runs `work` with `viewer` as the request's reader; `signIn` says whether sign-in is offered. */
export function withViewer<T>(
  viewer: Viewer | undefined,
  signIn: boolean,
  work: () => Promise<T>,
): Promise<T> {
  return current.run({ viewer, signIn }, work);
}

/** The signed-in reader, if any. */
export function viewer(): Viewer | undefined {
  return current.getStore()?.viewer;
}

/** True when this appview offers sign-in (a server key is configured). */
export function signInOffered(): boolean {
  return current.getStore()?.signIn ?? false;
}
