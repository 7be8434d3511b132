import { activeSession } from '../../auth/login.ts';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { KnotlessError } from 'knotless-core/errors';
import { forkRepo } from '../../forge/fork.ts';
import { repoUri } from '../../forge/records.ts';
import { checkRepoName, parseRepoSpec } from 'knotless-core/records/name';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, stringOption, type Command } from '../command.ts';

export const command: Command = {
  name: 'repo fork',
  args: '<handle/repo>',
  summary: "copy someone's repository into your account, to push to and propose pull requests from",
  details: [
    'Every ref is copied with its packs (their blobs stored again in your account), and the new repository record names the original in forkOf.',
  ],
  options: {
    name: { type: 'string', value: 'N', help: "the fork's name (default: the original's)" },
    json: JSON_OPTION,
  },
  examples: ['knotless repo fork alice.test/site', 'git clone knotless://bob.test/site'],
  positionals: { min: 1, max: 1 },
  async run({ ctx, io, args }) {
    const spec = parseRepoSpec(args.positionals[0]!);
    if (spec.owner === undefined)
      throw new KnotlessError('usage', 'Name whose repository to fork: handle/repo.');
    const newName = checkRepoName(stringOption(args, 'name') ?? spec.name);
    const c = ctx();
    const source = await c.resolver.resolve(spec.owner);
    const auth = await activeSession(c);
    if (source.did === auth.session.did && newName === spec.name) {
      // One that is not there at all is said so first (repo-missing), not "that is your own".
      await c.repoRecords().get(source, spec.name);
      throw new KnotlessError(
        'usage',
        `That is your own ${safeText(spec.name)}; give the copy another --name.`,
      );
    }
    const refs = await forkRepo(c, auth, source, spec.name, newName, new BlobCache(c.config.cacheDir), (m) =>
      io.err(`knotless: warning: ${m}`),
    );
    const url = `knotless://${auth.session.handle}/${newName}`;
    if (args.values['json'] === true)
      io.out(
        safeJson({
          id: `${auth.session.handle}/${newName}`,
          uri: repoUri(auth.session.did, newName),
          forkOf: repoUri(source.did, spec.name),
          state: 'forked',
          title: newName,
          author: auth.session.handle,
          refs,
          url,
        }),
      );
    else io.out(url);
    io.err(
      `Forked ${safeText(source.handle ?? source.did)}/${safeText(spec.name)} (${refs} ref${refs === 1 ? '' : 's'} copied). Clone it: git clone ${url}`,
    );
  },
};
