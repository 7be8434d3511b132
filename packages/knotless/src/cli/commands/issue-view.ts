import { ISSUES } from '../../forge/kinds.ts';
import { commentsOn } from '../../forge/subjects.ts';
import { utcTime } from 'knotless-core/forge/short-id';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, type Command } from '../command.ts';
import {
  commentJson,
  currentDid,
  itemFor,
  itemJson,
  labelsText,
  printBody,
  printComments,
} from '../forge-shared.ts';

export const command: Command = {
  name: 'issue view',
  args: '<[handle/]repo> <id>',
  summary: 'show an issue with its state and comments',
  options: { json: JSON_OPTION },
  positionals: { min: 2, max: 2 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const { target, item, r } = await itemFor(c, io, ISSUES, args);
    const me = await currentDid(c);
    const comments = await commentsOn(
      r,
      ISSUES,
      item.uri,
      [target.owner.did, item.did, ...(me === undefined ? [] : [me])],
      me,
    );
    if (args.values['json'] === true) {
      io.out(safeJson({ ...itemJson(item), body: item.record.body, comments: comments.map(commentJson) }));
      return;
    }
    io.out(safeText(item.record.title, 300));
    io.out(`  id       ${safeText(item.id)}`);
    io.out(`  state    ${item.state}`);
    io.out(`  author   ${safeText(item.handle ?? item.did)}`);
    io.out(`  opened   ${utcTime(item.record.createdAt) ?? safeText(item.record.createdAt, 40)}`);
    io.out(`  repo     ${target.label}`);
    if (item.labels.length > 0) io.out(`  labels   ${labelsText(item.labels)}`);
    printBody(io, item.record.body);
    printComments(io, comments);
  },
};
