// A check's verdict on one commit (dev.knotless.check), in the runner's account.
import { isObjectId } from '../../git/refname.ts';
import { hasUnsafe } from '../../text/terminal.ts';
import { CHECK, CHECK_STATES, InvalidRecord, type CheckRecord } from '../records.ts';
import { checkRepoUri, forgeKind, uriOf } from './kind.ts';
import checkLexicon from '../../../../../lexicons/dev/knotless/check.json' with { type: 'json' };

export const CHECK_KIND = forgeKind({
  name: 'check',
  collection: CHECK,
  lexicon: checkLexicon,
  signIn: false,
  table: 'checks',
  noun: 'check',
  parse(value): CheckRecord {
    const v = value as unknown as CheckRecord;
    checkRepoUri(CHECK, v.repo);
    if (!isObjectId(v.commit)) throw new InvalidRecord(CHECK, 'its commit is not a 40-hex commit id');
    if (hasUnsafe(v.context)) throw new InvalidRecord(CHECK, 'its context holds control characters');
    // The lexicon lists known values only (open to new ones): a state this version does not know is no state.
    if (!(CHECK_STATES as readonly string[]).includes(v.state))
      throw new InvalidRecord(CHECK, 'its state is unknown');
    if (v.targetUrl !== undefined && !/^https?:\/\//i.test(v.targetUrl))
      throw new InvalidRecord(CHECK, 'its targetUrl is not an https or http address');
    // Printed wherever checks are listed: a line break, an escape sequence or a bidi override in it
    // could forge or reorder the lines around it, so the record is refused, not cleaned per reader.
    if (v.description !== undefined && hasUnsafe(v.description))
      throw new InvalidRecord(CHECK, 'its description holds control characters (it is one line of text)');
    return {
      repo: v.repo,
      commit: v.commit,
      context: v.context,
      state: v.state,
      ...(v.targetUrl === undefined ? {} : { targetUrl: v.targetUrl }),
      ...(v.description === undefined ? {} : { description: v.description }),
      createdAt: v.createdAt,
    };
  },
  row(r) {
    const repo = uriOf(r.repo);
    return {
      repo_did: repo.did,
      repo_name: repo.rkey,
      sha: r.commit,
      context: r.context,
      state: r.state,
      target_url: r.targetUrl ?? null,
      description: r.description ?? null,
    };
  },
});
