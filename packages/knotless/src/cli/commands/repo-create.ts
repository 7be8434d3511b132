import { activeSession } from '../../auth/login.ts';
import { checkRepoName } from 'knotless-core/records/name';
import { stringOption, type Command } from '../command.ts';

export const command: Command = {
  name: 'repo create',
  args: '<name>',
  summary: 'create a repository in your account',
  details: ['A name is letters, digits, ".", "_" and "-", 1 to 100 characters. Prints the URL to push to.'],
  options: {
    description: { type: 'string', short: 'd', value: 'D', help: 'a one-line description' },
  },
  examples: ['knotless repo create hello --description "my first repository"'],
  positionals: { min: 1, max: 1 },
  async run({ ctx, io, args }) {
    const name = checkRepoName(args.positionals[0]!);
    const c = ctx();
    const auth = await activeSession(c);
    await c.repoRecords().create(auth, name, stringOption(args, 'description'));
    io.out(`knotless://${auth.session.handle}/${name}`);
    io.err(
      `Created ${auth.session.handle}/${name}. Push to it: git remote add origin knotless://${auth.session.handle}/${name}`,
    );
  },
};
