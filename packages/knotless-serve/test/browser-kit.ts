// What every browser test does on every page: launch the packaged Chromium, and after each visit
// check that the page broke nothing in its own Content-Security-Policy (no violation reported, no
// element with a style attribute, no inline script or event handler) and that axe-core finds no
// serious or critical accessibility violation.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { BrowserContext, Page } from 'playwright-core';

/** axe-core's browser bundle, read from its npm package. */
const AXE_SOURCE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export { launchChromium as launchBrowser } from './chromium.ts';

/**
 * A page that records CSP violations: a listener installed before any page script runs (through
 * the DevTools protocol, which the page's CSP does not govern), and console errors that name the
 * policy.
 */
export async function watchedPage(browser: BrowserContext): Promise<{ page: Page; cspErrors: string[] }> {
  const page = await browser.newPage();
  const cspErrors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
  });
  await page.addInitScript(() => {
    const w = window as unknown as { cspViolations: string[] };
    w.cspViolations = [];
    document.addEventListener('securitypolicyviolation', (e) =>
      w.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`),
    );
  });
  return { page, cspErrors };
}

/** Fails when the page broke or would break its CSP, or axe-core finds a serious violation. */
export async function checkPage(page: Page, cspErrors: string[], what: string): Promise<void> {
  const found = await page.evaluate(() => {
    const inlineHandlers = Array.from(document.querySelectorAll('*')).filter((el) =>
      Array.from(el.attributes).some((a) => a.name.startsWith('on')),
    );
    return {
      violations: (window as unknown as { cspViolations?: string[] }).cspViolations ?? ['listener missing'],
      styled: Array.from(document.querySelectorAll('[style]')).map((el) => el.outerHTML.slice(0, 120)),
      styleTags: document.querySelectorAll('style').length,
      inlineScripts: Array.from(document.querySelectorAll('script')).filter((s) => !s.src).length,
      foreignScripts: Array.from(document.querySelectorAll('script[src]'))
        .map((s) => (s as HTMLScriptElement).src)
        .filter((src) => new URL(src).origin !== location.origin),
      handlers: inlineHandlers.map((el) => el.outerHTML.slice(0, 120)),
    };
  });
  assert.deepEqual(found.violations, [], `${what}: CSP violations`);
  assert.deepEqual(cspErrors, [], `${what}: CSP console errors`);
  assert.deepEqual(found.styled, [], `${what}: elements with a style attribute`);
  assert.equal(found.styleTags, 0, `${what}: <style> elements`);
  assert.equal(found.inlineScripts, 0, `${what}: inline scripts`);
  assert.deepEqual(found.foreignScripts, [], `${what}: scripts from elsewhere`);
  assert.deepEqual(found.handlers, [], `${what}: inline event handlers`);
  // axe-core runs in the page through the DevTools protocol (page.evaluate), so the page's CSP,
  // which would refuse an injected <script>, stays as it is for the checks above.
  await page.evaluate(AXE_SOURCE);
  const serious = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(ctx: Document, opts: object): Promise<AxeResults> } }).axe;
    interface AxeResults {
      violations: { id: string; impact: string | null; nodes: { target: unknown[] }[] }[];
    }
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact ?? ''}): ${v.nodes.map((n) => JSON.stringify(n.target)).join(', ')}`);
  });
  assert.deepEqual(serious, [], `${what}: axe-core serious or critical violations`);
}
