import "./helpers/env.js";
import t from "tap";
import type * as Tap from "tap";
import fs from "node:fs";
import path from "node:path";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { SignJWT, generateKeyPair } from "jose";
import { defaultPlugins, HubGameConfigPlugin } from "@hubpkg/hub";
import { createHouseBankroll, createPlayerBalance, getHouseBankroll, startTestServer, type TestServer } from "@hubpkg/hub/test";
import { CoinflipBetPlugin, CoinflipPlanPlugin, referenceMigrationsPath, TowerPlugin } from "@hubpkg/hub/plugins";
import { ensureDashboardBuilt } from "./helpers/dashboard-build.js";
import { gql } from "./helpers/http.js";
import { makeOperator, makePlayer, type Player } from "./helpers/credentials.js";

/*
 * The operator's dashboard in a real browser: Debian's chromium (CHROMIUM_PATH
 * to use another), driven by playwright-core, against a real hub and Postgres.
 * Screenshots of every page, at 1280 px and at a phone's width, go to
 * .tap/dashboard-screenshots (printed below); the page must never be wider
 * than the window.
 */

const ROOT = path.resolve(import.meta.dirname, "..");
const SHOTS = path.join(ROOT, ".tap", "dashboard-screenshots");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const XSS_NAME = `<script>alert(1)</script><img src=x onerror=alert(2)>`;
const VIEWPORTS = { desktop: { width: 1280, height: 900 }, phone: { width: 390, height: 844 } } as const;

let hub: TestServer;
let browser: Browser;
let operatorKey: string;
let xss: Player;
let bettor: Player;
const dialogs: string[] = [];
const pageErrors: string[] = [];

t.before(async () => {
  await ensureDashboardBuilt();
  fs.mkdirSync(SHOTS, { recursive: true });
  hub = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: referenceMigrationsPath,
    plugins: [
      ...defaultPlugins,
      CoinflipPlanPlugin,
      CoinflipBetPlugin,
      TowerPlugin({ maxFloor: 3 }),
      HubGameConfigPlugin({ outcomeBetConfigs: { GENERAL: { houseEdge: 0.01, saveOutcomes: false } }, customGameConfigs: { TOWER: { riskPolicy: ({ bankroll }) => ({ maxPayout: bankroll * 0.01 }) } } }),
    ],
  });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
  operatorKey = (await makeOperator(hub.superuserDatabaseUrl)).key;
  xss = await makePlayer(hub.superuserDatabaseUrl, XSS_NAME);
  bettor = await makePlayer(hub.superuserDatabaseUrl, "dashboard-bettor");
  if (!(await getHouseBankroll(hub.dbPool, { casinoId: bettor.casinoId, currencyKey: "HOUSE" }))) {
    await createHouseBankroll(hub.dbPool, { casinoId: bettor.casinoId, currencyKey: "HOUSE", amount: 1_000_000 });
  }
  for (const p of [xss, bettor]) {
    await createPlayerBalance(hub.dbPool, { userId: p.userId, experienceId: p.experienceId, currencyKey: "HOUSE", amount: 10_000 });
    for (let i = 0; i < 3; i++) await bet(p);
  }
  t.comment(`screenshots: ${SHOTS}`);
});
t.teardown(async () => {
  await browser?.close();
  await hub?.stop();
});

async function bet(p: Player, wager = 10): Promise<string> {
  const res = await gql(hub.url, `mutation { makeCoinflipBet(input: { currency: "HOUSE", wager: ${wager}, side: HEADS }) { bet { id } } }`, {}, p.header);
  if (res.body.errors) throw new Error(JSON.stringify(res.body.errors));
  return (res.body.data as any).makeCoinflipBet.bet.id;
}

async function newPage(viewport: { width: number; height: number } = VIEWPORTS.desktop): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport, deviceScaleFactor: 1 });
  const page = await context.newPage();
  page.on("dialog", (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  page.on("pageerror", (e) => pageErrors.push(e.message));
  page.on("console", (m) => {
    if (m.type() === "error" && /Content.Security.Policy|Refused to/i.test(m.text())) pageErrors.push(m.text());
  });
  return { context, page };
}

async function login(page: Page, key: string) {
  await page.goto(`${hub.url}/admin/`);
  await page.fill('input[name="apiKey"]', key);
  await page.click('button[type="submit"]');
}

async function shoot(t: Tap.Test, page: Page, name: string) {
  const file = path.join(SHOTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  const overflow = (await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")) as number;
  t.ok(overflow <= 0, `${name}: no wider than the window (${overflow} px over)`);
}

t.test("/admin: static files with a CSP that allows no inline script, and a page without any", async (t) => {
  const res = await fetch(`${hub.url}/admin`, { redirect: "manual" });
  t.equal(res.status, 301, "/admin redirects to /admin/ (the page's links are relative)");
  const index = await fetch(`${hub.url}/admin/`);
  t.equal(index.status, 200);
  const csp = index.headers.get("content-security-policy") ?? "";
  t.match(csp, /script-src 'self'(;|$)/);
  t.notMatch(csp, /unsafe-inline|unsafe-eval/);
  t.match(csp, /default-src 'none'/);
  const html = await index.text();
  const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
  t.ok(scripts.length > 0, "the page has its script");
  for (const s of scripts) {
    t.match(s[1], /src="\.\/assets\/[^"]+\.js"/, "every script is a file of the build");
    t.equal(s[2]!.trim(), "", "no inline code");
  }
  t.notMatch(html, /https?:\/\//, "nothing from another origin");
  const asset = /src="\.\/(assets\/[^"]+\.js)"/.exec(html)![1]!;
  const js = await fetch(`${hub.url}/admin/${asset}`);
  t.equal(js.status, 200);
  t.match(js.headers.get("content-type"), /javascript/);
  t.equal((await fetch(`${hub.url}/admin/assets/nope.js`)).status, 404);
});

t.test("a refused key shows an error and stays on the login form", async (t) => {
  const { context, page } = await newPage();
  t.teardown(() => context.close());
  await login(page, "0190f3a0-0000-7000-8000-000000000000");
  const alert = page.locator('[role="alert"]');
  await alert.waitFor();
  t.match(await alert.textContent(), /refused this API key/);
  t.equal(await page.locator("nav").count(), 0, "not signed in");
  t.equal(await page.evaluate("sessionStorage.length"), 0, "the refused key is not kept");
  await shoot(t, page, "login-refused-1280");
});

t.test("log in with a key, then every page, at 1280 px and at a phone's width", async (t) => {
  for (const [name, viewport] of Object.entries(VIEWPORTS)) {
    const { context, page } = await newPage(viewport);
    t.teardown(() => context.close());
    await login(page, operatorKey);
    await page.locator("nav").waitFor();
    t.equal(await page.evaluate('sessionStorage.getItem("hub.dashboard.apiKey")'), operatorKey, "the key is in this tab's session storage");
    t.notMatch(page.url(), new RegExp(operatorKey), "never in the URL");

    await page.locator("figure.chart").first().waitFor();
    t.ok((await page.locator("figure.chart").count()) >= 4, "overview: the bankroll's charts");
    t.match(await page.locator(".stats").first().textContent(), /Realised house profit/);
    await shoot(t, page, `overview-${name}`);

    await page.goto(`${hub.url}/admin/#/players`);
    await page.fill('input[aria-label="Player name"]', "bettor");
    await page.press('input[aria-label="Player name"]', "Enter");
    await page.locator('table[data-testid="players"] a', { hasText: "dashboard-bettor" }).click();
    await page.locator('table[data-testid="ledger"]').waitFor();
    t.equal(await page.locator('[data-testid="player-name"]').textContent(), "dashboard-bettor");
    await shoot(t, page, `player-${name}`);

    await page.goto(`${hub.url}/admin/#/bets`);
    await page.locator('table[data-testid="bets"]').waitFor();
    t.ok((await page.locator('table[data-testid="bets"] tbody tr').count()) >= 6, "bets: the players' bets are listed");
    await shoot(t, page, `bets-${name}`);
    await page.locator('table[data-testid="bets"] tbody tr a').first().click();
    await page.locator("dl.kv").first().waitFor();
    t.match(await page.locator("dl.kv").first().textContent(), /wager/);
    await shoot(t, page, `bet-detail-${name}`);

    await page.goto(`${hub.url}/admin/#/transfers`);
    await page.locator("h1, .unavailable").first().waitFor();
    await shoot(t, page, `transfers-${name}`);

    await page.goto(`${hub.url}/admin/#/config`);
    await page.locator('table[data-testid="casinos"]').waitFor();
    await page.locator('table[data-testid="api-keys"]').waitFor();
    await shoot(t, page, `configuration-${name}`);
  }
});

t.test("a player named with markup is shown as text, and runs nothing", async (t) => {
  const { context, page } = await newPage();
  t.teardown(() => context.close());
  await login(page, operatorKey);
  await page.locator("nav").waitFor();
  await page.goto(`${hub.url}/admin/#/players`);
  await page.fill('input[aria-label="Player name"]', "<script>");
  await page.press('input[aria-label="Player name"]', "Enter");
  const link = page.locator('table[data-testid="players"] a').first();
  await link.waitFor();
  t.equal(await link.textContent(), XSS_NAME, "the name, character for character, in the search results");
  await link.click();
  await page.locator('[data-testid="player-name"]').waitFor();
  t.equal(await page.locator('[data-testid="player-name"]').textContent(), XSS_NAME, "and as the player's heading");
  await page.goto(`${hub.url}/admin/#/bets`);
  await page.locator('table[data-testid="bets"] a', { hasText: "<script>" }).first().waitFor();
  t.equal(await page.evaluate('document.querySelectorAll("#root script, #root img").length'), 0, "no element was made from the name");
  await page.waitForTimeout(300);
  t.same(dialogs, [], "no dialog opened");
  await shoot(t, page, "xss-name-1280");
});

t.test("find a player and revoke a session: the player's next request is refused", async (t) => {
  const victim = await makePlayer(hub.superuserDatabaseUrl, "revoke-me-from-the-dashboard");
  await createPlayerBalance(hub.dbPool, { userId: victim.userId, experienceId: victim.experienceId, currencyKey: "HOUSE", amount: 100 });
  await bet(victim);
  const { context, page } = await newPage();
  t.teardown(() => context.close());
  await login(page, operatorKey);
  await page.locator("nav").waitFor();
  await page.goto(`${hub.url}/admin/#/players`);
  await page.fill('input[aria-label="Player name"]', "revoke-me");
  await page.press('input[aria-label="Player name"]', "Enter");
  await page.locator('table[data-testid="players"] a', { hasText: "revoke-me-from-the-dashboard" }).click();
  const sessions = page.locator('table[data-testid="sessions"]');
  await sessions.waitFor();
  t.match(await sessions.textContent(), /active until/);
  await sessions.getByRole("button", { name: "Revoke" }).click();
  await sessions.getByRole("button", { name: "Yes, revoke" }).click();
  await sessions.getByText(/^revoked /).waitFor();
  const res = await gql(hub.url, 'mutation { makeCoinflipBet(input: { currency: "HOUSE", wager: 10, side: HEADS }) { bet { id } } }', {}, victim.header);
  t.equal(res.body.errors?.[0]?.extensions?.code, "UNAUTHENTICATED", "the revoked session is refused");
  await shoot(t, page, "session-revoked-1280");
});

t.test("Configuration: an API key created is shown once and works", async (t) => {
  const { context, page } = await newPage();
  t.teardown(() => context.close());
  await login(page, operatorKey);
  await page.locator("nav").waitFor();
  await page.goto(`${hub.url}/admin/#/config`);
  await page.getByRole("button", { name: "Create a key" }).click();
  const shown = page.locator('[data-testid="new-key"] input');
  await shown.waitFor();
  const key = await shown.inputValue();
  const check = await gql(hub.url, "{ allHubApiKeys { totalCount } }", {}, { authorization: `apikey:${key}` });
  t.ok((check.body.data as any).allHubApiKeys.totalCount >= 2, "the new key is an operator key");
  await page.getByRole("button", { name: "Done" }).click();
  t.equal(await page.locator('[data-testid="new-key"]').count(), 0, "gone once dismissed");
  t.notMatch(await page.content(), new RegExp(key), "and nowhere in the page");

  const before = (await getHouseBankroll(hub.dbPool, { casinoId: hub.playgroundCasinoId, currencyKey: "HOUSE" }))!.amount;
  const form = page.locator("form", { hasText: "Credit a house bankroll" });
  await form.locator('select[name="casinoId"]').selectOption({ label: "playground" });
  await form.locator('input[name="currencyKey"]').fill("HOUSE");
  await form.locator('input[name="amount"]').fill("1234");
  await form.locator('input[name="reason"]').fill("top-up from the dashboard");
  await form.getByRole("button", { name: "Credit a house bankroll" }).click();
  await form.locator(".ok").waitFor();
  t.equal((await getHouseBankroll(hub.dbPool, { casinoId: hub.playgroundCasinoId, currencyKey: "HOUSE" }))!.amount, before + 1234, "a bankroll credited through the form");
  const { rows } = await hub.dbPool.query("select reason, actor from hub.ledger where account = 'house' order by id desc limit 1");
  t.match(rows[0], { reason: "top-up from the dashboard", actor: /^api_key:/ }, "in the ledger, by the operator's key");
});

t.test("Configuration: a casino whose key set cannot be fetched shows its last failure", async (t) => {
  // A port nobody listens on: a server opened and closed again.
  const closed = http.createServer();
  await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
  const port = (closed.address() as AddressInfo).port;
  await new Promise((r) => closed.close(r));
  const op = { authorization: `apikey:${operatorKey}` };
  const added = await gql(hub.url, `mutation($u: String!) { hubAddCasino(input: { name: "keys-down", jwksUrl: $u }) { casinoId } }`, { u: `http://127.0.0.1:${port}/jwks.json` }, op);
  const casinoId = (added.body.data as any).hubAddCasino.casinoId as string;
  const { privateKey } = await generateKeyPair("ES256");
  const token = await new SignJWT({ uname: "locked-out" }).setProtectedHeader({ alg: "ES256", kid: "k1" }).setExpirationTime("5m").sign(privateKey);
  const out = await gql(hub.url, "mutation($c: UUID!, $t: String!) { hubAuthenticate(input: { casinoId: $c, userToken: $t }) { sessionToken } }", { c: casinoId, t: token });
  t.equal(out.body.errors?.[0]?.extensions?.code, "CASINO_KEYS_UNAVAILABLE");

  const { context, page } = await newPage();
  t.teardown(() => context.close());
  await login(page, operatorKey);
  await page.locator("nav").waitFor();
  await page.goto(`${hub.url}/admin/#/config`);
  const row = page.locator('table[data-testid="casinos"] tr', { hasText: "keys-down" });
  await row.locator('[data-testid="key-set-failure"]').waitFor();
  t.match(await row.locator('[data-testid="key-set-failure"]').textContent(), /could not be reached/, "the failure's reason, on the casino's row");
  t.equal(await page.locator('table[data-testid="casinos"] tr', { hasText: "playground" }).locator('[data-testid="key-set-failure"]').count(), 0, "none on a casino without one");
  await shoot(t, page, "configuration-key-set-failure-1280");
});

t.test("live feed: a bet placed by a test player appears", async (t) => {
  const schema = await gql(hub.url, "{ __schema { subscriptionType { fields { name } } } }");
  const fields = ((schema.body.data as any)?.__schema.subscriptionType?.fields ?? []) as { name: string }[];
  t.ok(fields.some((f) => f.name === "hubBetAlert"), "the hub has the subscription hubBetAlert");
  const { context, page } = await newPage();
  t.teardown(() => context.close());
  await login(page, operatorKey);
  await page.locator("nav").waitFor();
  await page.goto(`${hub.url}/admin/#/bets`);
  await page.locator(".badge.live").waitFor();
  const id = await bet(bettor);
  const row = page.locator('table[data-testid="live-feed"] tr', { has: page.locator(`[data-bet-id="${id}"]`) });
  await row.waitFor({ timeout: 10_000 });
  t.pass("the bet is in the live feed");
  await row.getByText("dashboard-bettor").waitFor();
  t.pass("with the player's name");
  await page.locator('table[data-testid="bets"] tbody tr').nth(0).getByText("dashboard-bettor").waitFor();
  t.pass("and the list below refreshed");

  // A tower climb: its wager and its cash-out move the balance; each shows in the feed.
  const start = await gql(hub.url, `mutation { startTower(input: { wager: 20, currency: "HOUSE" }) { result { __typename ... on StartTowerSuccess { game { id } } } } }`, {}, bettor.header);
  const gameId = (start.body.data as any)?.startTower.result.game?.id as string;
  t.ok(gameId, `a tower game started (${JSON.stringify(start.body.errors ?? (start.body.data as any)?.startTower.result.__typename)})`);
  const chain = await gql(hub.url, "mutation { hubCreateHashChain { hashChain { id } } }", {}, bettor.header);
  const chainId = (chain.body.data as any).hubCreateHashChain.hashChain.id as string;
  const move = await gql(hub.url, `mutation($i: MoveTowerInput!) { moveTower(input: $i) { result { __typename ... on MoveTowerSuccess { survived } } } }`, { i: { gameId, tile: 0, hashChainId: chainId, clientSeed: "dashboard" } }, bettor.header);
  const survived = (move.body.data as any)?.moveTower.result.survived as boolean;
  t.type(survived, "boolean", `the move was played (${JSON.stringify(move.body.errors ?? (move.body.data as any)?.moveTower.result)})`);
  if (survived) await gql(hub.url, `mutation { cashOutTower(input: { gameId: "${gameId}" }) { balance } }`, {}, bettor.header);
  const tower = page.locator('table[data-testid="live-feed"] tbody tr', { hasText: /tower/i });
  await tower.first().waitFor({ timeout: 10_000 });
  t.comment(`tower rows in the feed: ${JSON.stringify(await tower.allTextContents())}`);
  t.ok((await tower.count()) >= 1, "the tower's balance changes are in the live feed");
  await shoot(t, page, "live-feed-1280");
});

t.test("no script error and no CSP violation in any page", async (t) => {
  t.same(pageErrors, []);
});

t.test("introspection off: refused to anonymous users and players, allowed to operators, so the dashboard signs in", async (t) => {
  const closed = await startTestServer({ logLevel: "silent", introspection: false });
  t.teardown(() => closed.stop());
  const operator = await makeOperator(closed.superuserDatabaseUrl);
  const player = await makePlayer(closed.superuserDatabaseUrl, "introspecting-player");
  const INTROSPECT = "{ __schema { queryType { name } } }";
  const TYPE = `{ __type(name: "HubUser") { name } }`;
  const code = (res: Awaited<ReturnType<typeof gql>>) => res.body.errors?.[0]?.extensions?.code;
  for (const query of [INTROSPECT, TYPE]) {
    const anonymous = await gql(closed.url, query);
    t.equal(code(anonymous), "GRAPHQL_VALIDATION_FAILED", `anonymous: refused (${anonymous.body.errors?.[0]?.message})`);
    t.equal(code(await gql(closed.url, query, {}, player.header)), "GRAPHQL_VALIDATION_FAILED", "a player: refused");
    const asOperator = await gql(closed.url, query, {}, operator.header);
    t.equal(asOperator.body.errors, undefined, "an operator: answered");
    t.ok(asOperator.body.data, "with the schema's data");
    // The same text again, now that an operator's request validated it: the cache must not hand it to others.
    t.equal(code(await gql(closed.url, query)), "GRAPHQL_VALIDATION_FAILED", "anonymous after the operator: still refused");
    t.equal(code(await gql(closed.url, query, {}, player.header)), "GRAPHQL_VALIDATION_FAILED", "a player after the operator: still refused");
    const forged = await gql(closed.url, query, {}, { authorization: "apikey:00000000-0000-0000-0000-000000000000" });
    t.not(forged.body.data && !forged.body.errors, true, `a key that is not one: no schema (${code(forged)})`);
  }
  const { context, page } = await newPage();
  t.teardown(() => context.close());
  await page.goto(`${closed.url}/admin/`);
  await page.fill('input[name="apiKey"]', operator.key);
  await page.click('button[type="submit"]');
  await page.locator('nav, [role="alert"]').first().waitFor();
  t.equal(await page.locator('[role="alert"]').count(), 0, `no error shown: ${await page.locator('[role="alert"]').allTextContents()}`);
  await page.locator("nav").waitFor();
  t.pass("the dashboard signs in with an operator's key");
});

t.test("the dashboard moves or turns off with the dashboard option", async (t) => {
  for (const [dashboard, served, notServed] of [
    ["/ops", "/ops/", "/admin/"],
    [false, undefined, "/admin/"],
  ] as const) {
    const other = await startTestServer({ logLevel: "silent", dashboard });
    try {
      if (served) {
        const res = await fetch(`${other.url}${served}`);
        t.equal(res.status, 200, `${String(dashboard)}: served at ${served}`);
        t.match(res.headers.get("content-security-policy"), /script-src 'self'/);
      }
      t.equal((await fetch(`${other.url}${notServed}`)).status, 404, `${String(dashboard)}: nothing at ${notServed}`);
    } finally {
      await other.stop();
    }
  }
});
