import "./helpers/env.js";
import t from "tap";
import fs from "node:fs";
import path from "node:path";
import { createHash, createHmac, randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import { chromium, type Browser, type Page } from "playwright-core";
import { defaultPlugins } from "@hubpkg/hub";
import { extendSchema, gql as sdl } from "@hubpkg/hub/graphile";
import { startTestServer, type TestServer } from "@hubpkg/hub/test";
import { makeOperator, makePlayer, type Player } from "./helpers/credentials.js";

/*
 * The dashboard's Bets (provably fair verification) and Transfers pages in a
 * real browser, against tables in the shapes of their GraphQL contracts
 * (test/fixtures/dashboard-contracts: stand-ins where the hub has not got the
 * real tables). The verification runs in the page (WebCrypto); the hashes
 * here are made with node:crypto by the chain's rules.
 */

const ROOT = path.resolve(import.meta.dirname, "..");
const SHOTS = path.join(ROOT, ".tap", "dashboard-screenshots");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
// The transfers work brings its own tables and mutations: then this file's stand-ins step aside.
const REAL_TRANSFERS = fs.existsSync(path.join(ROOT, "src/db/migrations/0015-transfers.sql"));

/** Retry and refund as the transfers contract names them, acting on the stand-in table. */
const StandInTransferActions = extendSchema(
  () => ({
    typeDefs: sdl`
      input HubWithdrawalActionInput { withdrawalRequestId: UUID! }
      type HubWithdrawalActionPayload { withdrawalRequestId: UUID! }
      extend type Mutation {
        hubRetryWithdrawal(input: HubWithdrawalActionInput!): HubWithdrawalActionPayload!
        hubRefundWithdrawal(input: HubWithdrawalActionInput!): HubWithdrawalActionPayload!
      }
    `,
    resolvers: {
      Mutation: {
        async hubRetryWithdrawal(_p: unknown, { input }: any, context: any) {
          await context.superuserPool.query("update hub.withdrawal set attempts = attempts + 1, last_error = null, next_attempt_at = now(), status_at = now() where withdrawal_request_id = $1", [input.withdrawalRequestId]);
          return input;
        },
        async hubRefundWithdrawal(_p: unknown, { input }: any, context: any) {
          await context.superuserPool.query("update hub.withdrawal set status = 'CANCELED', status_at = now() where withdrawal_request_id = $1", [input.withdrawalRequestId]);
          return input;
        },
      },
    },
  }),
  "StandInTransferActions",
);

let hub: TestServer;
let browser: Browser;
let operatorKey: string;
let player: Player;

t.before(async () => {
  if (!fs.existsSync(path.join(ROOT, "dist/dashboard/index.html"))) {
    execFileSync("npm", ["run", "build:dashboard", "--silent"], { cwd: ROOT, stdio: "inherit" });
  }
  fs.mkdirSync(SHOTS, { recursive: true });
  hub = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    userDatabaseMigrationsPath: path.join(ROOT, "test/fixtures/dashboard-contracts"),
    plugins: [...defaultPlugins, ...(REAL_TRANSFERS ? [] : [StandInTransferActions])],
  });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
  operatorKey = (await makeOperator(hub.superuserDatabaseUrl)).key;
  player = await makePlayer(hub.superuserDatabaseUrl, "fair-player");
});
t.teardown(async () => {
  await browser?.close();
  await hub?.stop();
});

async function signedIn(): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  t.teardown(() => context.close());
  const page = await context.newPage();
  page.on("dialog", (d) => void d.dismiss());
  await page.goto(`${hub.url}/admin/`);
  await page.fill('input[name="apiKey"]', operatorKey);
  await page.click('button[type="submit"]');
  await page.locator("nav").waitFor();
  return page;
}

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest();
function outcomeIndex(hash: Buffer, clientSeed: string, weights: number[]): number {
  const h = createHmac("sha256", hash).update(clientSeed, "utf8").digest();
  const fraction = Number(BigInt(`0x${h.subarray(0, 7).toString("hex")}`) >> 4n) / 2 ** 52;
  const total = weights.reduce((a, b) => a + b, 0);
  let cumulative = 0;
  for (let i = 0; i < weights.length; i++) {
    cumulative += weights[i]!;
    if (fraction * total < cumulative) return i;
  }
  return weights.length - 1;
}

t.test("Bets: a provably fair bet's detail verifies its outcome and its chain link in the browser", async (t) => {
  // A chain of 10: hash(i) = SHA-256(hash(i - 1)); bets use 9 and 8, the terminal hash (10) commits to both.
  const chain: Buffer[] = [randomBytes(32)];
  for (let i = 1; i <= 10; i++) chain.push(sha256(chain[i - 1]!));
  const db = hub.dbPool;
  const { rows: [c] } = await db.query<{ id: string }>(
    "insert into hub.hash_chain (user_id, casino_id, experience_id, max_iteration, current_iteration) values ($1, $2, $3, 10, 8) returning id",
    [player.userId, player.casinoId, player.experienceId],
  );
  const seed = `<b>seed</b> & "quotes"`;
  const weights = [1, 2, 3];
  const outcomes = `{"(1,-1)","(2,0.5)","(3,0.2)"}`;
  const hashIds: string[] = [];
  for (const [iteration, kind, clientSeed] of [[10, "TERMINAL", null], [9, "INTERMEDIATE", seed], [8, "INTERMEDIATE", seed]] as const) {
    const { rows } = await db.query<{ id: string }>(
      "insert into hub.hash (hash_chain_id, kind, digest, iteration, client_seed) values ($1, $2, $3, $4, $5) returning id",
      [c!.id, kind, chain[iteration], iteration, clientSeed],
    );
    hashIds.push(rows[0]!.id);
  }
  const honest = outcomeIndex(chain[9]!, seed, weights);
  const tampered = (outcomeIndex(chain[8]!, seed, weights) + 1) % 3;
  const bets: string[] = [];
  for (const [hashId, idx] of [[hashIds[1], honest], [hashIds[2], tampered]] as const) {
    const { rows } = await db.query<{ id: string }>(
      `insert into hub.outcome_bet (kind, wager, profit, net, outcomes, outcome_idx, currency_key, hash_id, user_id, casino_id, experience_id, metadata)
       values ('DICE', 100, 0, 0, $1, $2, 'HOUSE', $3, $4, $5, $6, $7) returning id`,
      [outcomes, idx, hashId, player.userId, player.casinoId, player.experienceId, JSON.stringify({ note: "<img src=x onerror=alert(1)>" })],
    );
    bets.push(rows[0]!.id);
  }

  const page = await signedIn();
  await page.goto(`${hub.url}/admin/#/bets`);
  const list = page.locator('table[data-testid="bets"]');
  await list.waitFor();
  t.match(await list.textContent(), /HubOutcomeBet · DICE/, "the fair bets are in the list, with their kind");
  await page.fill('input[aria-label="Kind filter"]', "DICE");
  await page.click('form.filters button[type="submit"]');
  await list.locator("tbody tr").nth(1).waitFor();
  t.equal(await list.locator("tbody tr").count(), 2, "filtered by kind: the two DICE bets");
  await page.fill('input[aria-label="Kind filter"]', "PLINKO");
  await page.click('form.filters button[type="submit"]');
  await page.getByText("No bets match.").waitFor();
  t.pass("no bet of another kind");

  await page.goto(`${hub.url}/admin/#/bets/HubOutcomeBet/${bets[0]}`);
  const outcome = page.locator('[data-testid="verify-outcome"]');
  await outcome.waitFor();
  t.match(await outcome.textContent(), new RegExp(`✔ outcome ${honest} as recorded`));
  t.match(await page.locator('[data-testid="verify-chain"]').textContent(), /✔ SHA-256 of this hash is the hash of iteration 10/);
  t.ok((await page.locator("dl.kv").last().textContent())!.includes(seed), "the client seed, as text");
  t.ok((await page.locator("dl.kv").first().textContent())!.includes("<img src=x onerror=alert(1)>"), "the metadata, as text");
  t.equal(await page.evaluate('document.querySelectorAll("#root img, #root b").length'), 0, "no element made from them");
  await page.screenshot({ path: path.join(SHOTS, "bet-fair-verified-1280.png"), fullPage: true });

  await page.goto(`${hub.url}/admin/#/bets/HubOutcomeBet/${bets[1]}`);
  const wrong = page.locator('[data-testid="verify-outcome"]', { hasText: "✘" });
  await wrong.waitFor();
  t.match(await wrong.textContent(), new RegExp(`✘ computed outcome ${(tampered + 2) % 3}, recorded ${tampered}`), "a recorded outcome the hash does not give is flagged");
  await page.locator("h1", { hasText: bets[1]!.slice(-8) }).waitFor();
  t.match(await page.locator('[data-testid="verify-chain"]').textContent(), /✔ SHA-256 of this hash is the hash of iteration 9/);

  // A chain whose next hash is not the SHA-256 of this one.
  await db.query("update hub.hash set digest = $1 where id = $2", [randomBytes(32), hashIds[1]]);
  await page.reload();
  const broken = page.locator('[data-testid="verify-chain"]', { hasText: "✘" });
  await broken.waitFor();
  t.match(await broken.textContent(), /✘ SHA-256 of this hash is not the hash of iteration 9/);
  await page.screenshot({ path: path.join(SHOTS, "bet-fair-tampered-1280.png"), fullPage: true });
});

t.test("Transfers: deposits, requests and withdrawals; a stuck one shows its error and is retried after a confirmation", async (t) => {
  if (REAL_TRANSFERS) {
    t.skip("the hub has the real transfers tables now: their own tests drive them; this page test used stand-ins", () => undefined);
    return;
  }
  const db = hub.dbPool;
  await db.query("insert into hub.deposit (casino_id, mp_transfer_id, user_id, experience_id, currency_key, amount) values ($1, 'mp-dep-1', $2, $3, 'HOUSE', 500)", [player.casinoId, player.userId, player.experienceId]);
  const { rows: [request] } = await db.query<{ id: string }>(
    "insert into hub.withdrawal_request (casino_id, user_id, experience_id, currency_key, amount) values ($1, $2, $3, 'HOUSE', 70) returning id",
    [player.casinoId, player.userId, player.experienceId],
  );
  await db.query(
    `insert into hub.withdrawal (withdrawal_request_id, casino_id, user_id, experience_id, currency_key, amount, status, status_at, attempts, last_error, next_attempt_at)
     values ($1, $2, $3, $4, 'HOUSE', 70, 'PENDING', now() - interval '1 hour', 7, 'casino answered 502 <Bad Gateway>', now() + interval '10 minutes')`,
    [request!.id, player.casinoId, player.userId, player.experienceId],
  );
  const page = await signedIn();
  await page.goto(`${hub.url}/admin/#/transfers`);
  const withdrawals = page.locator('table[data-testid="allHubWithdrawals"]');
  await withdrawals.waitFor();
  const row = withdrawals.locator("tr.stuck");
  t.equal(await row.count(), 1, "the pending, erroring withdrawal is marked stuck");
  t.match(await row.textContent(), /casino answered 502 <Bad Gateway>/, "with its last error, as text");
  t.match(await withdrawals.locator("thead").textContent(), /attempts.*lastError.*nextAttemptAt/, "the retry columns the hub exposes are shown");
  t.match(await page.locator('table[data-testid="allHubDeposits"]').textContent(), /mp-dep-1/);
  t.match(await page.locator('table[data-testid="allHubWithdrawalRequests"]').textContent(), /70/);
  await page.screenshot({ path: path.join(SHOTS, "transfers-stuck-1280.png"), fullPage: true });

  await row.getByRole("button", { name: "Retry now" }).click();
  const attemptsBefore = (await db.query("select attempts from hub.withdrawal where withdrawal_request_id = $1", [request!.id])).rows[0].attempts;
  t.equal(attemptsBefore, 7, "nothing happens before the confirmation");
  await row.getByRole("button", { name: "Yes, retry now" }).click();
  await withdrawals.locator("tr.stuck").waitFor({ state: "detached" });
  const after = (await db.query("select attempts, last_error from hub.withdrawal where withdrawal_request_id = $1", [request!.id])).rows[0];
  t.same(after, { attempts: 8, last_error: null }, "hubRetryWithdrawal ran for that request");
});
