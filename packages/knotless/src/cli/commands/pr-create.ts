import { activeSession } from '../../auth/login.ts';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { KnotlessError } from 'knotless-core/errors';
import { makeRound } from 'knotless-core/forge/packs';
import { PULL, checkToWrite, isValidBranch, parsePull, repoUri, writeRecord } from '../../forge/records.ts';
import { parseRepoSpec } from 'knotless-core/records/name';
import { readRepoRefs } from 'knotless-core/records/read-refs';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, stringOption, type Command } from '../command.ts';
import { createdItem, forgeReader, itemJson, targetOf } from '../forge-shared.ts';

/** `--head [handle/]repo:branch`: the repository (yours without a handle) and branch to propose. */
function parseHead(text: string): { owner: string | undefined; name: string; branch: string } {
  const colon = text.lastIndexOf(':');
  if (colon <= 0 || colon === text.length - 1)
    throw new KnotlessError('usage', `--head "${safeText(text)}" is not [handle/]repo:branch.`);
  const repo = text.slice(0, colon);
  const branch = text.slice(colon + 1);
  if (!isValidBranch(branch))
    throw new KnotlessError('usage', `"${safeText(branch)}" is not a valid branch name.`);
  // The same [handle/]name every command takes: a third part is a usage error, not a handle.
  const spec = parseRepoSpec(repo);
  return { owner: spec.owner, name: spec.name, branch };
}

export const command: Command = {
  name: 'pr create',
  args: '<[handle/]repo>',
  summary: 'propose a branch (of a fork, or of the repository itself) for merging',
  details: [
    "The pull request is a record in your account. Its first round pins the head branch's commit and stores the commits it adds (a pack of what the base branch lacks) as a blob in your account, so the pull request can be reviewed and merged even after the branch is deleted.",
  ],
  options: {
    head: {
      type: 'string',
      value: '[handle/]repo:branch',
      help: 'what to merge (required; your repository without a handle)',
    },
    base: {
      type: 'string',
      value: 'B',
      help: "the branch to merge into (default: the repository's HEAD branch)",
    },
    title: { type: 'string', short: 't', value: 'T', help: 'the title (required)' },
    body: { type: 'string', short: 'b', value: 'B', help: 'the description' },
    json: JSON_OPTION,
  },
  examples: ['knotless pr create alice.test/site --head site:fix --base main --title "Fix"'],
  positionals: { min: 1, max: 1 },
  async run({ ctx, io, args }) {
    const headText = stringOption(args, 'head');
    const title = stringOption(args, 'title');
    if (headText === undefined)
      throw new KnotlessError('usage', 'Say what to merge with --head [handle/]repo:branch.');
    if (title === undefined || title.trim() === '')
      throw new KnotlessError('usage', 'Give the pull request a --title.');
    const head = parseHead(headText);
    const c = ctx();
    const target = await targetOf(c, args.positionals[0]!);
    const auth = await activeSession(c);
    const headOwner =
      head.owner === undefined
        ? await c.resolver.resolve(auth.session.did)
        : await c.resolver.resolve(head.owner);
    const warn = (m: string) => io.err(`knotless: warning: ${m}`);
    const targetRepo = c.remoteRepo(target.owner, target.name, warn);
    let base = stringOption(args, 'base');
    if (base === undefined) {
      // The repository's HEAD whatever its layout: its ref table's `head`, or its HEAD record.
      const symref = (await readRepoRefs(targetRepo)).find((r) => r.record.ref === 'HEAD')?.record.symref;
      if (symref === undefined)
        throw new KnotlessError('usage', `${target.label} has no HEAD branch; say which with --base.`);
      base = symref.replace(/^refs\/heads\//, '');
    }
    if (!isValidBranch(base))
      throw new KnotlessError('usage', `"${safeText(base)}" is not a valid branch name.`);
    const headRepo = c.remoteRepo(headOwner, head.name, warn);
    const body = stringOption(args, 'body');
    const draft = {
      repo: target.uri,
      base,
      head: { repo: repoUri(headOwner.did, head.name), branch: head.branch },
      title,
      ...(body === undefined || body === '' ? {} : { body }),
    };
    // Checked before the pack is uploaded: a title too long should not cost an upload.
    const placeholder = {
      $type: 'blob',
      ref: { $link: 'bafkreibme22gw2h7y2h7tg2fhqotaqjucnbc24deqo72b6mkl2egezxhvy' },
      mimeType: 'application/x-git-packed-objects',
      size: 32,
    };
    const now = new Date().toISOString();
    await checkToWrite(
      parsePull,
      {
        ...draft,
        rounds: [{ head: '0'.repeat(40), base: '0'.repeat(40), pack: placeholder, createdAt: now }],
        createdAt: now,
      },
      'pull request',
    );
    const round = await makeRound(
      c,
      auth,
      targetRepo,
      base,
      headRepo,
      head.branch,
      new BlobCache(c.config.cacheDir),
    );
    if (round.head === round.base)
      throw new KnotlessError(
        'usage',
        `${safeText(head.branch)} holds nothing that ${safeText(base)} lacks; nothing was written.`,
      );
    const record = { ...draft, rounds: [round], createdAt: new Date().toISOString() };
    const made = await forgeReader(c, io).store.create(auth, PULL, writeRecord(PULL, record));
    const item = createdItem(auth.session, made, record);
    const id = item.id;
    if (args.values['json'] === true)
      io.out(safeJson({ ...itemJson(item), head: round.head, base: round.base }));
    else io.out(id);
    io.err(`Opened pull request ${id} into ${safeText(base)} of ${target.label}.`);
  },
};
