import { KnotlessError } from '../errors.ts';
import { safeText } from '../text/terminal.ts';

/**
 * One sentence for an account its PDS does not serve as active, naming the account and its state:
 * a user asked for a repository, and "not found" or "check its spelling" would send them looking
 * for a typo.
 */
export function inactiveAccount(name: string, pds: string, status: string): KnotlessError {
  const who = safeText(name);
  const where = safeText(pds);
  const sentence: Record<string, string> = {
    deactivated: `The account ${who} is deactivated; its repositories are unavailable until its owner activates it again.`,
    takendown: `The account ${who} has been taken down by its PDS (${where}); its repositories are unavailable.`,
    suspended: `The account ${who} is suspended by its PDS (${where}); its repositories are unavailable for now.`,
    deleted: `The account ${who} has been deleted from its PDS (${where}); its repositories are gone.`,
  };
  return new KnotlessError(
    'account-inactive',
    sentence[status] ??
      `The account ${who} is not active on its PDS (${where}: ${safeText(status)}); its repositories are unavailable.`,
  );
}
