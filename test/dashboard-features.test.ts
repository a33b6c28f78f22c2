import "./helpers/env.js";
import t from "tap";
import type * as Tap from "tap";
import fs from "node:fs";
import path from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { defaultPlugins, HubGameConfigPlugin, type OutcomeBetConfigMap } from "@hubpkg/hub";
import { clientSeedForOutcome, createHouseBankroll, createPlayer, getHouseBankroll, startTestServer, type TestServer } from "@hubpkg/hub/test";
import { verifyBet } from "../src/dashboard/fair.js";
import { ensureDashboardBuilt } from "./helpers/dashboard-build.js";
import { signedInPage } from "./helpers/dashboard.js";
import { startSimCasino, type SimCasino } from "./helpers/sim-casino.js";
import { addSimCasino, FAST_TRANSFERS, ok, sleep, waitFor } from "./helpers/transfers.js";

/*
 * The dashboard's Bets (provably fair verification) and Transfers pages in a
 * real browser, on the hub's own features: a hash chain made, bet on and
 * revealed through GraphQL, and a deposit and a withdrawal through a simulated
 * casino (test/helpers/sim-casino.ts) that goes down. The verification runs in
 * the page (WebCrypto) with nothing but what the hub published.
 */

const ROOT = path.resolve(import.meta.dirname, "..");
const SHOTS = path.join(ROOT, ".tap", "dashboard-screenshots");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const NAME = `fair <b>player</b>`;
const SEED = `<b>seed</b> & "quotes"`;
const DICE = [{ weight: 1, profit: 1 }, { weight: 2, profit: 0.5 }, { weight: 3, profit: -1 }];
const outcomeBetConfigs: OutcomeBetConfigMap<"DICE" | "GENERAL"> = {
  DICE: { houseEdge: 0.01, saveOutcomes: true },
  GENERAL: { houseEdge: 0.01, saveOutcomes: false },
};

let hub: TestServer;
let casino: SimCasino;
let casinoId: string;
let browser: Browser;
let operator: Record<string, string>;
let operatorKey: string;
let player: { userId: string; headers: Record<string, string> };
let experienceId: string;

/** A player of the simulated casino, with money deposited the way the casino's backend reports it. */
async function funded(uname: string, amount: number) {
  const user = await createPlayer(hub.dbPool, { casinoId, uname });
  const { token } = await hub.authenticate(user.id, experienceId);
  casino.fund(uname, "BTC", amount);
  const mpTransferId = casino.deposit(uname, "BTC", amount);
  await ok(hub.url, operator, "mutation($i: HubRecordDepositInput!) { hubRecordDeposit(input: $i) { created } }", {
    i: { casinoId, mpTransferId, uname, experience: "main", currencyKey: "BTC", amount },
  });
  return { userId: user.id, headers: { authorization: `session:${token}` } };
}

t.before(async () => {
  await ensureDashboardBuilt();
  fs.mkdirSync(SHOTS, { recursive: true });
  casino = await startSimCasino();
  hub = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    transfers: FAST_TRANSFERS,
    plugins: [...defaultPlugins, HubGameConfigPlugin({ outcomeBetConfigs, hashChainLength: 20 })],
  });
  operatorKey = (await hub.authenticateOperator()).apiKey;
  operator = { authorization: `apikey:${operatorKey}` };
  casinoId = await addSimCasino(hub.url, operator, casino, { poll: false });
  if (!(await getHouseBankroll(hub.dbPool, { casinoId, currencyKey: "BTC" }))) {
    await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: "BTC", amount: 10_000_000 });
  }
  const { rows } = await hub.dbPool.query<{ id: string }>("insert into hub.experience (casino_id, name) values ($1, 'main') returning id", [casinoId]);
  experienceId = rows[0]!.id;
  player = await funded(NAME, 10_000);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
  t.comment(`screenshots: ${SHOTS}`);
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

async function shoot(t: Tap.Test, page: Page, name: string) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
  const overflow = (await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")) as number;
  t.ok(overflow <= 0, `${name}: no wider than the window (${overflow} px over)`);
}

const BET = `mutation($i: HubMakeOutcomeBetInput!) { hubMakeOutcomeBet(input: $i) { result { __typename ... on HubMakeOutcomeBetSuccess { bet { id outcomeIdx hubHashByHashId { iteration digest } } } } } }`;

t.test("Bets: an outcome bet on a real chain, the chain revealed, verified in the browser", async (t) => {
  const { hubCreateHashChain } = await ok(hub.url, player.headers, "mutation { hubCreateHashChain { hashChain { id maxIteration } } }");
  const chain = hubCreateHashChain.hashChain as { id: string; maxIteration: number };
  // The first bet draws outcome 0 (the test chooses it through the seed), the second uses the marked-up seed.
  const seed0 = await clientSeedForOutcome(hub.dbPool, { hashChainId: chain.id, outcomes: DICE, outcomeIdx: 0 });
  const bets: { id: string; outcomeIdx: number; hubHashByHashId: { iteration: number; digest: string } }[] = [];
  for (const [kind, clientSeed] of [["DICE", seed0], ["DICE", SEED], ["GENERAL", "general seed"]] as const) {
    const r = await ok(hub.url, player.headers, BET, {
      i: { kind, wager: 100, currency: "BTC", outcomes: DICE, hashChainId: chain.id, clientSeed, metadata: { note: "<img src=x onerror=alert(1)>" } },
    });
    t.equal(r.hubMakeOutcomeBet.result.__typename, "HubMakeOutcomeBetSuccess", `${kind} bet placed`);
    bets.push(r.hubMakeOutcomeBet.result.bet);
  }
  t.equal(bets[0]!.outcomeIdx, 0, "the seed drew the outcome the test chose");
  t.same(bets.map((b) => b.hubHashByHashId.iteration), [19, 18, 17], "the chain's hashes, from the top");

  const page = await signedIn(t);
  await page.goto(`${hub.url}/admin/#/bets`);
  const list = page.locator('table[data-testid="bets"]');
  await list.waitFor();
  t.match(await list.textContent(), /HubOutcomeBet · DICE/, "the outcome bets are in the list, with their kind");
  await page.fill('input[aria-label="Kind filter"]', "DICE");
  await page.click('form.filters button[type="submit"]');
  // The unfiltered list is already on screen: wait until the GENERAL bet has left it, not for any two rows.
  await list.locator("tbody tr", { hasText: "GENERAL" }).waitFor({ state: "detached" });
  t.equal(await list.locator("tbody tr").count(), 2, "filtered by kind: the two DICE bets");

  // Before the reveal: the outcome and the link to the hash above are checked; the preimage is not out yet.
  await page.goto(`${hub.url}/admin/#/bets/HubOutcomeBet/${bets[1]!.id}`);
  await page.locator('[data-testid="verify-outcome"]').waitFor();
  t.match(await page.locator('[data-testid="verify-outcome"]').textContent(), new RegExp(`✔ outcome ${bets[1]!.outcomeIdx} as recorded`));
  t.match(await page.locator('[data-testid="verify-chain"]').textContent(), /✔ SHA-256 of this hash is the hash of iteration 19/);
  t.match(await page.locator('[data-testid="verify-preimage"]').textContent(), /Not revealed yet/);

  const { hubRevealHashChain } = await ok(hub.url, player.headers, "mutation($i: HubRevealHashChainInput!) { hubRevealHashChain(input: $i) { preimageHash { iteration kind } } }", { i: { hashChainId: chain.id } });
  t.same(hubRevealHashChain.preimageHash, { iteration: 0, kind: "PREIMAGE" }, "the chain is revealed");

  for (const [i, b] of bets.entries()) {
    await page.goto(`${hub.url}/admin/#/bets/HubOutcomeBet/${b.id}`);
    await page.locator("h1", { hasText: b.id.slice(-8) }).waitFor();
    const preimage = page.locator('[data-testid="verify-preimage"]', { hasText: "✔" });
    await preimage.waitFor();
    t.match(await preimage.textContent(), new RegExp(`✔ SHA-256 applied ${b.hubHashByHashId.iteration} times to the revealed preimage gives this hash`), `bet ${i}: the revealed preimage proves its hash`);
    t.match(await page.locator('[data-testid="verify-chain"]').textContent(), new RegExp(`✔ SHA-256 of this hash is the hash of iteration ${b.hubHashByHashId.iteration + 1}`));
    const outcome = (await page.locator('[data-testid="verify-outcome"]').textContent()) ?? "";
    if (i < 2) t.match(outcome, new RegExp(`✔ outcome ${b.outcomeIdx} as recorded`), `bet ${i}: the outcome checked`);
    else t.match(outcome, /does not save its outcomes/, "a kind without saved outcomes: said so, the chain still checked");
    t.match(await page.locator("dl.kv").first().textContent(), /revealed|<img src=x onerror=alert\(1\)>/);
    if (i === 1) {
      t.ok((await page.locator("dl.kv").last().textContent())!.includes(SEED), "the client seed, as text");
      t.ok((await page.locator("dl.kv").first().textContent())!.includes("<img src=x onerror=alert(1)>"), "the metadata, as text");
      t.equal(await page.evaluate('document.querySelectorAll("#root img, #root b").length'), 0, "no element made from them");
      await shoot(t, page, "bet-fair-verified-1280");
    }
  }
  const phone = await signedIn(t, 390);
  await phone.goto(`${hub.url}/admin/#/bets/HubOutcomeBet/${bets[1]!.id}`);
  await phone.locator('[data-testid="verify-preimage"]', { hasText: "✔" }).waitFor();
  await shoot(t, phone, "bet-fair-verified-phone");

  // The page's own check flags what does not fit: the same hash with another seed, and a wrong link.
  const digest = bets[1]!.hubHashByHashId.digest;
  const honest = await verifyBet({ digest, clientSeed: SEED, weights: DICE.map((o) => o.weight), outcomeIdx: bets[1]!.outcomeIdx, nextDigest: bets[0]!.hubHashByHashId.digest });
  t.match(honest, { outcomeMatches: true, chainMatches: true, computedIdx: bets[1]!.outcomeIdx });
  let wrongSeed = "";
  for (let i = 0; !wrongSeed; i++) {
    const v = await verifyBet({ digest, clientSeed: `other-${i}`, weights: DICE.map((o) => o.weight), outcomeIdx: bets[1]!.outcomeIdx });
    if (v.outcomeMatches === false) wrongSeed = `other-${i}`;
  }
  t.pass(`another seed (${wrongSeed}) gives another outcome: flagged`);
  const swapped = await verifyBet({ digest, clientSeed: SEED, weights: DICE.map((o) => o.weight), outcomeIdx: bets[1]!.outcomeIdx, nextDigest: bets[2]!.hubHashByHashId.digest });
  t.equal(swapped.chainMatches, false, "a hash that is not the next iteration's: the link is flagged");
});

t.test("Transfers: a real deposit, a withdrawal stuck while the casino is down, retried and refunded after confirmations", async (t) => {
  const page = await signedIn(t);
  await page.goto(`${hub.url}/admin/#/transfers`);
  t.match(await page.locator('table[data-testid="allHubDeposits"]').textContent(), new RegExp(NAME.replace(/[<>/]/g, ".")), "the deposit, with the player's name as text");

  // The casino refuses every send: each attempt fails with the casino's answer.
  casino.failNext("outgoing", { kind: "error500" }, 100_000);
  const WITHDRAW = "mutation($a: Float!) { hubWithdraw(input: { currencyKey: \"BTC\", amount: $a }) { withdrawalRequest { id } } }";
  const requestId = (await ok(hub.url, player.headers, WITHDRAW, { a: 700 })).hubWithdraw.withdrawalRequest.id as string;
  const JOB = "query($id: UUID!) { allHubTransferJobs(condition: { withdrawalRequestId: $id }) { nodes { status attempts lastError nextAttemptAt } } }";
  const job = async () => (await ok(hub.url, operator, JOB, { id: requestId })).allHubTransferJobs.nodes[0];
  const failing = await waitFor("a failed attempt", 10_000, async () => {
    const j = await job();
    return j.attempts >= 1 && j.lastError ? j : undefined;
  });
  t.comment(`last error: ${failing.lastError}`);

  await page.reload();
  const withdrawals = page.locator('table[data-testid="allHubWithdrawals"]');
  const row = withdrawals.locator("tr.stuck");
  await row.waitFor();
  t.equal(await row.count(), 1, "the pending, failing withdrawal is marked stuck");
  t.match(await row.textContent(), /PENDING/);
  t.ok((await row.locator(".last-error").textContent())!.length > 0, `with its last error: ${await row.locator(".last-error").textContent()}`);
  t.match(await withdrawals.locator("thead").textContent(), /attempts.*lastError.*nextAttemptAt/, "the worker's attempts, last error and next attempt");
  t.match(await page.locator('table[data-testid="allHubWithdrawalRequests"]').textContent(), /700/);
  await shoot(t, page, "transfers-stuck-1280");
  const phone = await signedIn(t, 390);
  await phone.goto(`${hub.url}/admin/#/transfers`);
  await phone.locator('table[data-testid="allHubWithdrawals"] tr.stuck').waitFor();
  await shoot(t, phone, "transfers-stuck-phone");

  // Retry now: park the item an hour ahead, so that only the retry can make it due now. Only while
  // no attempt holds it: an attempt in flight writes its own next attempt when it ends.
  const parked = await waitFor("the item parked with no attempt in flight", 15_000, async () => {
    const { rows } = await hub.dbPool.query<{ attempts: number }>(
      "update hub.transfer_job set next_attempt_at = now() + interval '1 hour' where withdrawal_request_id = $1 and locked_by is null returning attempts",
      [requestId],
    );
    return rows[0]?.attempts;
  });
  await row.getByRole("button", { name: "Retry now", exact: true }).click();
  await row.getByRole("button", { name: "Yes, retry now", exact: true }).waitFor();
  await sleep(500);
  t.equal((await job()).attempts, parked, "asking changes nothing by itself");
  await waitFor("the retried attempt", 45_000, async () => {
    if ((await job()).attempts > parked) return true;
    const yes = withdrawals.locator("tr.stuck").getByRole("button", { name: "Yes, retry now", exact: true });
    if (!(await yes.count())) await withdrawals.locator("tr.stuck").getByRole("button", { name: "Retry now", exact: true }).click({ timeout: 2000 });
    await yes.click({ timeout: 2000 });
    return false;
  });
  t.pass("after the confirmation the casino is asked again at once (hubRetryWithdrawal)");
  t.equal((await job()).status, "PENDING", "still pending: the casino still refuses");

  // Refund: the casino never applied it, so the amount goes back to the player.
  const balance = async () => (await ok(hub.url, player.headers, "{ hubCurrentUser { hubBalanceByCurrency(currency: \"BTC\") { amount } } }")).hubCurrentUser.hubBalanceByCurrency.amount as number;
  const balanceBefore = await balance();
  await withdrawals.locator("tr.stuck").getByRole("button", { name: "Refund", exact: true }).click();
  await withdrawals.locator("tr.stuck").getByRole("button", { name: "Yes, refund", exact: true }).waitFor();
  t.equal(await balance(), balanceBefore, "nothing is refunded before the confirmation");
  // A send may still be on its way: the hub refuses the refund until it is sure (TRANSFER_REFUND_UNSAFE); the page says so, and a second try passes.
  const status = async () => (await ok(hub.url, operator, "query($id: UUID!) { allHubWithdrawals(condition: { withdrawalRequestId: $id }) { nodes { status } } }", { id: requestId })).allHubWithdrawals.nodes[0].status as string;
  const shown: string[] = [];
  await waitFor("refunded", 45_000, async () => {
    if ((await status()) === "CANCELED") return true;
    const stuckRow = withdrawals.locator("tr.stuck");
    if ((await stuckRow.count()) === 0) return false;
    const alert = stuckRow.locator('[role="alert"]');
    if (await alert.count()) shown.push((await alert.first().textContent()) ?? "");
    const yes = stuckRow.getByRole("button", { name: "Yes, refund", exact: true });
    // Short waits: the row stops being stuck once a refund passes, and the loop must come back to see it.
    if (!(await yes.count())) await stuckRow.getByRole("button", { name: "Refund", exact: true }).click({ timeout: 2000 });
    await yes.click({ timeout: 2000 });
    return false;
  });
  t.comment(`refusals shown on the way: ${JSON.stringify([...new Set(shown)])}`);
  for (const s of new Set(shown)) t.match(s, /try again|may still|refund/i, `a refusal is shown as the hub's message: ${s}`);
  t.equal(await status(), "CANCELED", "the withdrawal is CANCELED (hubRefundWithdrawal)");
  t.equal(await balance(), balanceBefore + 700, "the 700 are back in the player's balance");
  await withdrawals.locator("tr.stuck").waitFor({ state: "detached" });
  t.match(await withdrawals.textContent(), /CANCELED/, "the page shows it refunded, no longer stuck");
  await shoot(t, page, "transfers-refunded-1280");

  casino.clearFaults();
  t.equal(casino.balance(NAME, "BTC"), 0, "the casino paid nothing out: its player still has nothing there");
  const { rows } = await hub.dbPool.query("select count(*)::int as n from hub.withdrawal where withdrawal_request_id = $1 and status = 'CANCELED'", [requestId]);
  t.equal(rows[0].n, 1, "in the database too");
});

t.test("live feed: outcome bets of two kinds appear; then every page at 1280 px and at a phone's width", async (t) => {
  const page = await signedIn(t);
  await page.goto(`${hub.url}/admin/#/bets`);
  await page.locator(".badge.live").waitFor();
  const alice = await funded("alice", 5_000);
  const { hubCreateHashChain } = await ok(hub.url, alice.headers, "mutation { hubCreateHashChain { hashChain { id } } }");
  const ids: string[] = [];
  for (const [i, kind] of ["DICE", "GENERAL", "DICE", "DICE", "GENERAL"].entries()) {
    const r = await ok(hub.url, alice.headers, BET, {
      i: { kind, wager: 10 + i, currency: "BTC", outcomes: DICE, hashChainId: hubCreateHashChain.hashChain.id, clientSeed: `live-${i}` },
    });
    ids.push(r.hubMakeOutcomeBet.result.bet.id);
  }
  for (const id of ids) {
    await page.locator(`table[data-testid="live-feed"] [data-bet-id="${id}"]`).waitFor({ timeout: 10_000 });
  }
  t.pass("each outcome bet is in the live feed");
  await page.locator('table[data-testid="bets"] tbody tr').nth(ids.length + 2).waitFor();
  await page.locator('table[data-testid="bets"] tbody tr').first().getByText("alice").waitFor();
  t.match(await page.locator('table[data-testid="bets"]').textContent(), /HubOutcomeBet · DICE[\s\S]*HubOutcomeBet · GENERAL|HubOutcomeBet · GENERAL[\s\S]*HubOutcomeBet · DICE/, "the list shows both kinds");
  await shoot(t, page, "live-feed-outcome-bets-1280");

  for (const [name, width] of [["1280", 1280], ["phone", 390]] as const) {
    const p = await signedIn(t, width);
    await p.locator("figure.chart").first().waitFor();
    await shoot(t, p, `features-overview-${name}`);
    await p.goto(`${hub.url}/admin/#/players/${player.userId}`);
    await p.locator('table[data-testid="ledger"]').waitFor();
    await shoot(t, p, `features-player-${name}`);
    await p.goto(`${hub.url}/admin/#/bets`);
    await p.locator('table[data-testid="bets"] tbody tr').first().waitFor();
    await shoot(t, p, `features-bets-${name}`);
    await p.goto(`${hub.url}/admin/#/transfers`);
    await p.locator('table[data-testid="allHubWithdrawals"]').waitFor();
    await shoot(t, p, `features-transfers-${name}`);
    await p.goto(`${hub.url}/admin/#/config`);
    await p.locator('table[data-testid="casinos"]').waitFor();
    await shoot(t, p, `features-configuration-${name}`);
  }
});

t.test("no script error in any page", async (t) => {
  t.same(pageErrors, []);
});
