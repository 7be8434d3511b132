import path from 'node:path';
import { readJson } from 'knotless-core/fsutil';
import { KnotlessError } from 'knotless-core/errors';
import { safeText } from 'knotless-core/text/terminal';
import { ACCOUNT_ACTIONS, changeAccount, didOf, homeOf, type AccountAction } from '../account-state.ts';
import { attachNetwork } from '../attach.ts';
import { migrateAccount } from '../migrate.ts';
import { NetworkError } from '../network.ts';
import { runKnotless } from './run-knotless.ts';

/** The dev accounts' password: the env file's KNOTLESS_DEV_PASSWORD, else the one DIR/dev.json keeps. */
function devPassword(dir: string): string {
  const password =
    process.env['KNOTLESS_DEV_PASSWORD'] ??
    readJson<{ password?: string }>(path.join(dir, 'dev.json'))?.password;
  if (password === undefined || password === '')
    throw new KnotlessError(
      'dev-network',
      `${dir} keeps no dev password; source its env file (it sets KNOTLESS_DEV_PASSWORD).`,
    );
  return password;
}

/** A NetworkError is the user's to fix: one sentence and knotless dev's exit status. */
async function asUserError<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof NetworkError)
      throw new KnotlessError('dev-network', safeText(err.message), { cause: err });
    throw err;
  }
}

/**
 * `knotless dev migrate <handle>`: moves the account to the network's next PDS, printing each step.
 * When the shell it runs in is logged in as that account, it logs in again on the new PDS (the old
 * one's tokens are not the new one's), as a user does after a move.
 */
export async function runMigrate(dir: string, account: string, out: (line: string) => void): Promise<void> {
  const net = await asUserError(() => Promise.resolve().then(() => attachNetwork(dir)));
  const password = devPassword(dir);
  const did = await asUserError(() => didOf(net, account));
  const from = await asUserError(() => homeOf(net, did));
  const to = net.pdses[(net.pdses.indexOf(from) + 1) % net.pdses.length]!;
  if (to === from)
    throw new KnotlessError(
      'dev-network',
      `The network in ${dir} has one PDS; there is nowhere to move ${account} to.`,
    );
  out(`moving ${account} (${did}) from ${from.url} to ${to.url}`);
  const { handle } = await asUserError(() =>
    migrateAccount({
      plcUrl: net.plcUrl,
      from,
      to,
      account: did,
      password,
      step: (line) => out(`  ${line}`),
    }),
  );
  out(`${handle} now lives on ${to.url}`);
  const who = await runKnotless(['whoami', '--json'], {});
  if (who.code === 0 && (JSON.parse(who.stdout) as { did?: string }).did === did) {
    const login = await runKnotless(['login', handle, '--password'], {}, `${password}\n`);
    if (login.code !== 0)
      throw new KnotlessError(
        'dev-network',
        `Logging ${handle} in on ${to.url} failed: ${safeText(login.lastLine)}`,
      );
    out(`logged in again as ${handle} on ${to.url}`);
  }
}

/** `knotless dev account <handle> <action> [new-handle]`: what its user or its PDS's operator could do. */
export async function runAccount(
  dir: string,
  [account, action, extra]: string[],
  out: (line: string) => void,
): Promise<void> {
  if (account === undefined || !ACCOUNT_ACTIONS.includes(action as AccountAction)) {
    throw new KnotlessError(
      'usage',
      `usage: knotless dev account <handle> ${ACCOUNT_ACTIONS.join('|')} [new-handle]; see knotless dev --help.`,
    );
  }
  const net = await asUserError(() => Promise.resolve().then(() => attachNetwork(dir)));
  out(await asUserError(() => changeAccount(net, account, devPassword(dir), action as AccountAction, extra)));
}
