// The consent step of an OAuth login for scripts/install-check.sh: opens the address an installed
// `knotless login --no-browser` printed in headless Chromium, signs in and approves, as the OAuth
// tests do (packages/knotless/test/helpers/oauth-browser.ts). Usage: oauth-consent.ts <url> <password>
import { approveWith, closeBrowser, headless } from '../packages/knotless/test/helpers/oauth-browser.ts';

const [url, password] = process.argv.slice(2);
if (url === undefined || password === undefined) throw new Error('usage: oauth-consent.ts <url> <password>');
const page = await (await headless()).newPage();
try {
  await page.goto(url);
  await approveWith(password)(page);
} finally {
  await closeBrowser();
}
