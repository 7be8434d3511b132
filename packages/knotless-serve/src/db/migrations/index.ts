import type { Migration } from 'kysely/migration';
import { migration as m0001 } from './0001-init.ts';
import { migration as m0002 } from './0002-forge.ts';
import { migration as m0003 } from './0003-sign-in.ts';
import { migration as m0004 } from './0004-account-status.ts';
import { migration as m0005 } from './0005-private-repos.ts';
import { migration as m0006 } from './0006-notifications.ts';
import { migration as m0007 } from './0007-stars-and-line-comments.ts';
import { migration as m0008 } from './0008-checks-ignored.ts';
import { migration as m0009 } from './0009-webhooks.ts';
import { migration as m0010 } from './0010-checks.ts';
import { migration as m0011 } from './0011-ref-tables.ts';
import { migration as m0012 } from './0012-mentions.ts';
import { migration as m0013 } from './0013-maintainers.ts';
import { migration as m0014 } from './0014-verified-rev.ts';

/**
 * Numbered migrations, applied in order by kysely's Migrator, one file each: a new one is a file
 * here and its line below, never an edit of one already released. Column types are the ones SQLite
 * and PostgreSQL both accept; booleans are integers so that one query works on both.
 */
export const migrations: Record<string, Migration> = {
  '0001_init': m0001,
  '0002_forge': m0002,
  '0003_sign_in': m0003,
  '0004_account_status': m0004,
  '0005_private_repos': m0005,
  '0006_notifications': m0006,
  '0007_stars_and_line_comments': m0007,
  '0008_checks_ignored': m0008,
  '0009_webhooks': m0009,
  '0010_checks': m0010,
  '0011_ref_tables': m0011,
  '0012_mentions': m0012,
  '0013_maintainers': m0013,
  '0014_verified_rev': m0014,
};
