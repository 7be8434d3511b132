// A repository's branch protection (dev.knotless.protection), in the owner's account.
import { hasUnsafe } from '../../text/terminal.ts';
import { InvalidRecord, PROTECTION, isValidBranch, type ProtectionRecord } from '../records.ts';
import { checkRepoUri, forgeKind } from './kind.ts';
import protectionLexicon from '../../../../../lexicons/dev/knotless/protection.json' with { type: 'json' };

export const PROTECTION_KIND = forgeKind({
  name: 'protection',
  collection: PROTECTION,
  lexicon: protectionLexicon,
  signIn: false,
  table: 'protections',
  noun: 'protection',
  parse(value): ProtectionRecord {
    const v = value as unknown as ProtectionRecord;
    checkRepoUri(PROTECTION, v.repo);
    const seen = new Set<string>();
    for (const b of v.branches) {
      if (!isValidBranch(b.branch)) throw new InvalidRecord(PROTECTION, 'a branch name is invalid');
      if (seen.has(b.branch)) throw new InvalidRecord(PROTECTION, 'a branch is protected twice');
      seen.add(b.branch);
      if ((b.requiredChecks ?? []).some((c) => hasUnsafe(c)))
        throw new InvalidRecord(PROTECTION, 'a required check holds control characters');
    }
    return {
      repo: v.repo,
      branches: v.branches.map((b) => ({
        branch: b.branch,
        requiredChecks: [...new Set(b.requiredChecks ?? [])],
        trustedRunners: [...new Set(b.trustedRunners ?? [])],
        // Absent means not allowed: a protection written by an older writer protects at least as much.
        allowForcePush: b.allowForcePush === true,
        allowDeletion: b.allowDeletion === true,
      })),
      createdAt: v.createdAt,
    };
  },
  row: (r) => ({ repo: r.repo, branches: JSON.stringify(r.branches) }),
});
