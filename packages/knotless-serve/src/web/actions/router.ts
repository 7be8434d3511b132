// Every POST the appview takes: a form (no JavaScript needed), from a signed-in reader, carrying
// the session's CSRF token. A refusal is one sentence with its status: 401 signed out, 403 a form
// that did not come from this site's page.
import type http from 'node:http';
import { csrfMatches } from '../../auth/web-sessions.ts';
import { HttpError, type RepoTarget, type Site } from '../site.ts';
import { viewer } from '../viewer.ts';
import { newFeed } from '../pages/notifications.ts';
import { EDIT_FORM_BYTES, editFile } from './edit.ts';
import { forgeAction } from './forge.ts';
import { signOut, startSignIn } from './sign-in.ts';

/** The largest form taken but a file's edit (edit.ts sets its own): an issue's or a comment's text is far less. */
const MAX_FORM_BYTES = 256 * 1024;

async function readForm(req: http.IncomingMessage, max: number): Promise<URLSearchParams> {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded')
    throw new HttpError(415, 'Actions are posted as forms from the pages here.');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > max) throw new HttpError(413, 'That form is too large.');
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

/** Answers a POST to `segs` (the path's decoded segments). */
export async function handlePost(
  site: Site,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  segs: string[],
  findRepo: (actor: string, name: string) => Promise<RepoTarget>,
): Promise<string | undefined> {
  const isEdit = segs.length === 3 && segs[2] === 'edit';
  // The edit's larger body is read only for a signed-in reader.
  if (isEdit && viewer() === undefined) throw new HttpError(401, 'Sign in to do that.');
  const form = await readForm(req, isEdit ? EDIT_FORM_BYTES : MAX_FORM_BYTES);
  if (segs.length === 2 && segs[0] === '-' && segs[1] === 'signin')
    return void (await startSignIn(site, form, res));
  const v = viewer();
  if (v === undefined) throw new HttpError(401, 'Sign in to do that.');
  if (!csrfMatches(v, form.get('csrf') ?? undefined))
    throw new HttpError(
      403,
      'This form did not come from a page of this site, or has expired; reload the page and try again.',
    );
  if (segs.length === 2 && segs[0] === '-' && segs[1] === 'signout')
    return void (await signOut(site, v, res));
  if (segs.join('/') === '-/notifications/feed') return newFeed(site);
  const [actor, name, ...rest] = segs;
  if (actor === undefined || name === undefined || rest.length === 0)
    throw new HttpError(404, 'No such action.');
  const repo = await findRepo(actor, name);
  if (isEdit) await editFile(site, v, repo, form, res);
  else await forgeAction(site, v, repo, rest, form, res);
  return undefined;
}
