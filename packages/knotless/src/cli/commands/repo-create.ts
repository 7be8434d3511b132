import { activeSession } from '../../auth/login.ts';
import { checkRepoName } from 'knotless-core/records/name';
import { newPrivate } from 'knotless-core/private/members';
import { cacheRing } from 'knotless-core/private/ring';
import { startTable } from 'knotless-core/ops/table-migrate';
import { stringOption, type Command } from '../command.ts';
import { membersEnv } from './private-env.ts';

export const command: Command = {
  name: 'repo create',
  args: '<name>',
  summary: 'create a repository in your account',
  details: [
    'A name is letters, digits, ".", "_" and "-", 1 to 100 characters. Prints the URL to push to.',
    'With --private, everything pushed to it is encrypted on this machine for its members (you, until `knotless repo share`); its name, its members and the sizes and times of pushes stay public (docs/reference/private.md).',
  ],
  options: {
    description: { type: 'string', short: 'd', value: 'D', help: 'a one-line description' },
    private: { type: 'boolean', help: 'encrypt its contents for its members only' },
  },
  examples: [
    'knotless repo create hello --description "my first repository"',
    'knotless repo create secret --private',
  ],
  positionals: { min: 1, max: 1 },
  async run({ ctx, io, args }) {
    const name = checkRepoName(args.positionals[0]!);
    const c = ctx();
    const auth = await activeSession(c);
    const priv = args.values['private'] === true ? await newPrivate(membersEnv(c, auth)) : undefined;
    const made = await c
      .repoRecords()
      .create(auth, name, stringOption(args, 'description'), undefined, priv?.field);
    if (priv !== undefined) cacheRing(c.config.configDir, auth.session.did, name, priv.ring);
    // A public repository starts on an empty ref table unless KNOTLESS_REF_TABLE=0 keeps the old layout;
    // a private one starts on ref records, and moves onto its (sealed) table when it is given
    // maintainers or by `knotless repo migrate`.
    else if (c.config.refTable) {
      const { did, handle, pds } = auth.session;
      const remote = c.remoteRepo({ did, handle, pds }, name, (m) => io.err(`knotless: warning: ${m}`));
      // Made public just now: its privacy is settled without reading the record back.
      await remote.prepare('plain');
      await startTable(remote, auth, made.commit);
    }
    io.out(`knotless://${auth.session.handle}/${name}`);
    io.err(
      `Created ${auth.session.handle}/${name}. Push to it: git remote add origin knotless://${auth.session.handle}/${name}`,
    );
  },
};
