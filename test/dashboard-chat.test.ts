import "./helpers/env.js";
import t from "tap";
import fs from "node:fs";
import path from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { createExperience, createPlayer, postChatMessage, readChatMessages, startTestServer, type GraphQLClient, type TestServer } from "@hubpkg/hub/test";
import { ensureDashboardBuilt } from "./helpers/dashboard-build.js";

/*
 * The dashboard's Chat page in a real browser (Debian's chromium, or
 * CHROMIUM_PATH) against a real hub: a message with markup is shown as text;
 * an operator hides it, mutes and unmutes its author, makes them a mod and
 * removes them, posts a system message, and players see the effects through
 * GraphQL (and the database, for the mods).
 */
const ROOT = path.resolve(import.meta.dirname, "..");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const MARKUP = `<img src=x onerror=alert(1)><script>alert(2)</script> & "hi"`;

let hub: TestServer;
let browser: Browser;
let operatorKey: string;
let room: string;
let author: { userId: string; client: GraphQLClient };
const dialogs: string[] = [];

t.before(async () => {
  await ensureDashboardBuilt();
  hub = await startTestServer({ logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent" });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
  operatorKey = (await hub.authenticateOperator()).apiKey;
  room = (await createExperience(hub.dbPool, { casinoId: hub.playgroundCasinoId, name: "dashboard chat room" })).id;
  const user = await createPlayer(hub.dbPool, { casinoId: hub.playgroundCasinoId, uname: "chatty" });
  author = { userId: user.id, client: (await hub.authenticate(user.id, room)).graphqlClient };
});
t.teardown(async () => {
  await browser?.close();
  await hub?.stop();
});

async function openRoom(): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  t.teardown(() => context.close());
  const page = await context.newPage();
  page.on("dialog", (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  await page.goto(`${hub.url}/admin/`);
  await page.fill('input[name="apiKey"]', operatorKey);
  await page.click('button[type="submit"]');
  await page.locator("nav").waitFor();
  await page.goto(`${hub.url}/admin/#/chat/${room}`);
  await page.locator('table[data-testid="chat-messages"]').waitFor();
  return page;
}

t.test("the Chat page shows a message with markup as text, hides it, mutes and unmutes its author, makes and removes a mod, posts a system message", async (t) => {
  const posted = await postChatMessage(author.client, MARKUP);
  if (posted.__typename !== "HubChatCreateUserMessageSuccess") throw new Error(`could not post: ${posted.__typename}`);
  const page = await openRoom();
  const messages = page.locator('table[data-testid="chat-messages"]');
  const body = messages.locator('[data-testid="chat-body"]').first();
  t.equal(await body.textContent(), MARKUP, "the body, character for character");
  t.equal(await page.evaluate('document.querySelectorAll("#root script, #root img").length'), 0, "no element was made from it");

  await messages.getByRole("button", { name: "Hide" }).first().click();
  await messages.getByRole("button", { name: "Yes, hide" }).click();
  await messages.getByText(/\(hidden /).waitFor();
  t.notOk((await readChatMessages(author.client, room)).messages.some((m) => m.id === posted.chatMessage.id), "players no longer read the hidden message");

  await messages.getByRole("button", { name: "Mute…" }).first().click();
  await page.fill('input[aria-label="Reason"]', "shouting");
  await page.getByRole("button", { name: "Mute in the casino" }).click();
  await page.locator('table[data-testid="chat-mutes"]').getByText("shouting").waitFor();
  const muted = await postChatMessage(author.client, "let me speak");
  t.equal(muted.__typename, "HubChatUserMuted", "the author's next post answers HubChatUserMuted");

  const mutes = page.locator('table[data-testid="chat-mutes"]');
  await mutes.getByRole("button", { name: "Unmute" }).click();
  await mutes.getByRole("button", { name: "Yes, unmute" }).click();
  await page.getByText("Nobody is muted.").waitFor();
  t.equal((await postChatMessage(author.client, "thanks")).__typename, "HubChatCreateUserMessageSuccess", "unmuted: the author posts again");

  await messages.getByRole("button", { name: "Make mod" }).first().click();
  await messages.getByRole("button", { name: "Yes, make mod" }).click();
  await page.locator('table[data-testid="chat-mods"]').getByText("chatty").waitFor();
  const { rows } = await hub.dbPool.query("select 1 from hub.chat_mod where experience_id = $1 and user_id = $2", [room, author.userId]);
  t.equal(rows.length, 1, "the author is a mod of the room");

  const mods = page.locator('table[data-testid="chat-mods"]');
  await mods.getByRole("button", { name: "Remove mod" }).click();
  await mods.getByRole("button", { name: "Yes, remove mod" }).click();
  await page.getByText("No mod. Make a player a mod from one of their messages.").waitFor();
  const { rows: left } = await hub.dbPool.query("select 1 from hub.chat_mod where experience_id = $1 and user_id = $2", [room, author.userId]);
  t.equal(left.length, 0, "Remove mod: the author is no longer a mod of the room");
  await messages.getByRole("button", { name: "Make mod" }).first().waitFor();

  await page.fill('input[aria-label="System message"]', "Be nice <3");
  await page.getByRole("button", { name: "Post" }).click();
  await messages.getByText("Be nice <3").waitFor();
  const seen = (await readChatMessages(author.client, room)).messages;
  t.match(seen[0], { type: "system", body: "Be nice <3", userId: null }, "players read the system message, newest first");
  t.same(dialogs, [], "no dialog opened");

  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  await page.locator('table[data-testid="chat-messages"]').waitFor();
  const overflow = (await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")) as number;
  t.ok(overflow <= 0, `at a phone's width the page is no wider than the window (${overflow} px over)`);
  fs.mkdirSync(path.join(ROOT, ".tap", "dashboard-screenshots"), { recursive: true });
  await page.screenshot({ path: path.join(ROOT, ".tap", "dashboard-screenshots", "chat-phone.png"), fullPage: true });
});
