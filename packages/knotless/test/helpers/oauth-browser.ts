// The consent step of an OAuth login, done as a person would: `knotless login --no-browser` prints
// the PDS's sign-in address, and headless Chromium (the npm-packaged one, see knotless-serve's
// chromium.ts) opens it, signs in with the account's password and approves access.
import { spawn } from 'node:child_process';
import type { BrowserContext, Page } from 'playwright-core';
import { launchChromium } from '../../../knotless-serve/test/chromium.ts';
import { KNOTLESS_BIN, type Run } from './cli.ts';

let browser: BrowserContext | undefined;

/** The shared headless browser of this test process, started on first use. */
export async function headless(): Promise<BrowserContext> {
  if (browser !== undefined) return browser;
  browser = await launchChromium();
  return browser;
}

export async function closeBrowser(): Promise<void> {
  await browser?.close();
  browser = undefined;
}

/** What the consent step should do once the page is up. */
export type Consent = (page: Page) => Promise<void>;

/**
 * Runs `knotless login <handle> --no-browser [...extra]`, waits for the address it prints, lets
 * `consent` act on the page, and returns the finished process.
 */
export async function oauthLogin(
  env: Record<string, string>,
  handle: string,
  consent: Consent,
  extra: string[] = [],
): Promise<Run & { url: string }> {
  const child = spawn(process.execPath, [KNOTLESS_BIN, 'login', handle, '--no-browser', ...extra], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let found!: (url: string) => void;
  const printed = new Promise<string>((resolve) => (found = resolve));
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
    const m = /^\s+(http\S+)$/m.exec(stderr);
    if (m !== null) found(m[1]!);
  });
  const done = new Promise<number | null>((resolve) => child.on('close', resolve));
  const url = await Promise.race([printed, done.then(() => '')]);
  if (url !== '') {
    const page = await (await headless()).newPage();
    try {
      await page.goto(url);
      await consent(page);
    } catch (err) {
      // The login would wait for a redirect that is not coming.
      child.kill();
      throw err;
    } finally {
      await page.close();
    }
  }
  const code = await done;
  return { code, stdout, stderr, url };
}

/** Signs in at the PDS's page with the account's password and approves what knotless asks. */
export function approveWith(password: string): Consent {
  return async (page) => {
    await page.locator('input[name="password"]').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Authorize' }).click();
    // The PDS redirects to knotless's loopback listener, which answers with this page.
    await page.getByText('Signed in to knotless').waitFor();
  };
}

/** Signs in, then refuses access. */
export function denyWith(password: string): Consent {
  return async (page) => {
    await page.locator('input[name="password"]').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Deny access' }).click();
    await page.getByText('Sign-in failed').waitFor();
  };
}
