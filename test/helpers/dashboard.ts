/** Signing in to the dashboard in a real browser, for the dashboard's tests. */
import type * as Tap from "tap";
import type { Browser, Page } from "playwright-core";

/**
 * A fresh browser context at `width` px, signed in at `${hubUrl}/admin/` with the operator's key; closed when
 * the test ends. The page's uncaught errors are pushed to `pageErrors`, dialogs dismissed.
 */
export async function signedInPage(t: Tap.Test, browser: Browser, hubUrl: string, operatorKey: string, pageErrors: string[], width = 1280): Promise<Page> {
  const context = await browser.newContext({ viewport: { width, height: 900 }, deviceScaleFactor: 1 });
  t.teardown(() => context.close());
  const page = await context.newPage();
  page.on("dialog", (d) => void d.dismiss());
  page.on("pageerror", (e) => pageErrors.push(e.message));
  await page.goto(`${hubUrl}/admin/`);
  await page.fill('input[name="apiKey"]', operatorKey);
  await page.click('button[type="submit"]');
  await page.locator("nav").waitFor();
  return page;
}
