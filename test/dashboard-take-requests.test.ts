import "./helpers/env.js";
import t from "tap";
import type * as Tap from "tap";
import fs from "node:fs";
import path from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { createPlayer, startTestServer, type TestServer } from "@hubpkg/hub/test";
import { ensureDashboardBuilt } from "./helpers/dashboard-build.js";
import { signedInPage } from "./helpers/dashboard.js";
import { startSimCasino, type SimCasino } from "./helpers/sim-casino.js";
import { addSimCasino, FAST_TRANSFERS, ok, waitFor } from "./helpers/transfers.js";

/*
 * The dashboard's Transfers page shows take requests in a real browser: one
 * the simulated casino completed, and one stuck while the casino fails every
 * transfer, with the worker's attempts and last error.
 */

const ROOT = path.resolve(import.meta.dirname, "..");
const SHOTS = path.join(ROOT, ".tap", "dashboard-screenshots");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const NAME = `take <b>player</b>`;

let hub: TestServer;
let casino: SimCasino;
let casinoId: string;
let browser: Browser;
let operator: Record<string, string>;
let operatorKey: string;

t.before(async () => {
  await ensureDashboardBuilt();
  fs.mkdirSync(SHOTS, { recursive: true });
  casino = await startSimCasino();
  hub = await startTestServer({ logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent", transfers: FAST_TRANSFERS });
  operatorKey = (await hub.authenticateOperator()).apiKey;
  operator = { authorization: `apikey:${operatorKey}` };
  casinoId = await addSimCasino(hub.url, operator, casino, { poll: false, takeRequests: true });
  await createPlayer(hub.dbPool, { casinoId, uname: NAME });
  casino.fund(NAME, "BTC", 1000);
  const mpTransferId = casino.deposit(NAME, "BTC", 1000);
  await ok(hub.url, operator, "mutation($i: HubRecordDepositInput!) { hubRecordDeposit(input: $i) { created } }", {
    i: { casinoId, mpTransferId, uname: NAME, experience: "main", currencyKey: "BTC", amount: 1000 },
  });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
});
t.teardown(async () => {
  await browser?.close();
  await hub?.stop();
  await casino?.close();
});

const pageErrors: string[] = [];
function signedIn(t: Tap.Test, width = 1280): Promise<Page> {
  return signedInPage(t, browser, hub.url, operatorKey, pageErrors, width);
}

const TAKE = "query($id: UUID!) { hubTakeRequestByMpTakeRequestId(mpTakeRequestId: $id) { status } }";

t.test("Transfers: take requests, one completed and one stuck while the casino fails, with the worker's last error", async (t) => {
  const done = casino.requestTake(NAME, "BTC", 250);
  await waitFor("the first take request completed", 15_000, async () => (await ok(hub.url, operator, TAKE, { id: done })).hubTakeRequestByMpTakeRequestId?.status === "COMPLETED");
  casino.failNext("takeTransfer", { kind: "error500" }, 100_000);
  casino.requestTake(NAME, "BTC", 300);
  await waitFor("a failed attempt on the second", 15_000, async () => {
    const { allHubTransferJobs } = await ok(hub.url, operator, `{ allHubTransferJobs(condition: { kind: "TAKE" }) { nodes { lastError } } }`);
    return allHubTransferJobs.nodes.some((j: { lastError: string | null }) => j.lastError);
  });

  const page = await signedIn(t);
  await page.goto(`${hub.url}/admin/#/transfers`);
  const table = page.locator('table[data-testid="allHubTakeRequests"]');
  await table.locator("tr.stuck").waitFor();
  t.equal(await table.locator("tbody tr").count(), 2, "both take requests are listed");
  t.equal(await table.locator("tr.stuck").count(), 1, "the one the casino keeps failing is marked stuck");
  const row = table.locator("tr.stuck");
  t.match(await row.textContent(), /PROCESSING/);
  t.match(await row.locator(".last-error").textContent(), /HTTP 500/, "with the worker's last error");
  t.match(await table.textContent(), /COMPLETED[\s\S]*TRANSFERRED|TRANSFERRED[\s\S]*COMPLETED/, "the other is completed and transferred");
  t.match(await table.textContent(), new RegExp(NAME.replace(/[<>/]/g, ".")), "the player's name shown as text");
  t.match(await table.locator("thead").textContent(), /attempts.*lastError.*nextAttemptAt.*mpTakeRequestId/s, "the worker's columns, then the row's");

  for (const width of [1280, 390]) {
    const p = width === 1280 ? page : await signedIn(t, width);
    if (p !== page) {
      await p.goto(`${hub.url}/admin/#/transfers`);
      await p.locator('table[data-testid="allHubTakeRequests"] tr.stuck').waitFor();
    }
    await p.screenshot({ path: path.join(SHOTS, `take-requests-${width}.png`), fullPage: true });
    const overflow = (await p.evaluate("document.documentElement.scrollWidth - window.innerWidth")) as number;
    t.ok(overflow <= 0, `${width} px: no wider than the window (${overflow} px over)`);
  }
  casino.clearFaults();
});

t.test("no script error in any page", async (t) => {
  t.same(pageErrors, []);
});
