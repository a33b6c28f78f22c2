/**
 * Faults (issue 7): the database going away under load, SIGTERM under load,
 * request and statement timeouts, and a shutdown held up by a stuck request.
 * Every test runs `node dist/server.js` as operators do, over real HTTP, on a
 * real Postgres; the only processes signalled are the ones the test started
 * (the server process and the postmaster of the test's own tmp data dir).
 */
import "./helpers/env.js";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import t from "tap";
import WebSocket from "ws";
import { gql } from "./helpers/http.js";
import { ROOT, startServerProcess } from "./helpers/process.js";
import { makePlayer, withPool } from "./helpers/credentials.js";
import { tmpDir } from "./helpers/tmp.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import { isAlive, readPostmasterPid, startExternalPostgres, stopPostmasterOf } from "./helpers/external-postgres.js";
import { describeResult, sendOnce, startLoad, tally, type LoadRequest, type LoadResult } from "./helpers/load.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * "Fail quickly" is asserted as an order of events, not a duration: every
 * request sent while Postgres is down is answered before Postgres comes back.
 * Durations are printed (t.comment), never compared with a threshold.
 */

function superuserUrl(dataDir: string): string {
  const { superuserPassword } = JSON.parse(fs.readFileSync(path.join(dataDir, "credentials.json"), "utf8")) as { superuserPassword: string };
  const port = readPostmasterPid(path.join(dataDir, "pg"))!.port;
  return `postgres://postgres:${superuserPassword}@127.0.0.1:${port}/hub`;
}

const gqlBody = (query: string, variables?: Record<string, unknown>) => ({ query, ...(variables ? { variables } : {}) });

/** A GraphQL answer with data and no errors. */
function graphqlOk(r: LoadResult): boolean {
  return r.status === 200 && typeof r.body === "object" && r.body !== null && r.body.errors === undefined && r.body.data != null;
}

/** Poll fn until it returns true; resolves with the time it took, rejects after timeoutMs. */
async function waitFor(what: string, timeoutMs: number, fn: () => Promise<boolean>): Promise<number> {
  const started = Date.now();
  let last: unknown;
  for (;;) {
    try {
      if (await fn()) return Date.now() - started;
    } catch (error) {
      last = error;
    }
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms${last ? ` (last error: ${String(last)})` : ""}`);
    await sleep(100);
  }
}

/** The process's exit code; fails after `ms` naming what it waited for (a bound on the wait, not a speed requirement). */
async function exitedWithin(exited: Promise<number | null>, ms: number, what: string): Promise<number | null> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([exited, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`not within ${ms} ms: ${what}`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------

t.test("Postgres stopped under load: requests fail fast (GraphQL error or 503), the process stays up, and it recovers without a restart", async (t) => {
  const dir = tmpDir(t, "hub-faults-outage-");
  const db = await startExternalPostgres(t, path.join(dir, "pg-data"));
  const server = await startServerProcess({
    HUB_DATA_DIR: path.join(dir, "hub-unused"),
    DATABASE_URL: db.authenticatorUrl,
    SUPERUSER_DATABASE_URL: db.superuserUrl,
    HUB_CONFIG: path.join(ROOT, "test/fixtures/config-faults-outage.mjs"),
  });
  t.teardown(() => server.child.kill("SIGKILL"));
  t.notMatch(server.output(), /embedded Postgres started/, "the hub does not own this Postgres");
  const player = await makePlayer(db.superuserUrl, "outage-player");

  const mix: ((n: number) => LoadRequest)[] = [
    () => ({ kind: "anonymous", body: gqlBody("{ allHubCasinos { totalCount } }") }),
    () => ({ kind: "player", headers: player.header, body: gqlBody("{ hubCurrentUser { id } allCoinflips { totalCount } }") }),
    (n) => ({ kind: "flip", headers: player.header, body: gqlBody("mutation($w: Float!) { makeCoinflip(input: { currency: \"HOUSE\", wager: $w }) { id net } }", { w: 1 + (n % 3) }) }),
    () => ({ kind: "health", method: "GET", path: "/health" }),
    () => ({ kind: "whoami", method: "GET", path: "/whoami", headers: player.header }),
  ];
  const load = startLoad(server.url, { concurrency: 6, next: (w, n) => mix[(w + n) % mix.length]!(n), timeoutMs: 30_000, errorPauseMs: 50 });
  t.teardown(() => load.stop());

  // Healthy: everything succeeds. A count of answers, not a time: a loaded machine answers fewer per second.
  await waitFor("20 answers to the load before the outage", 60_000, async () => load.results.length > 20);
  const healthyUntil = Date.now();
  const healthy = load.results.filter((r) => r.doneAt <= healthyUntil);
  const healthyFailures = healthy.filter((r) => !(r.kind === "health" || r.kind === "whoami" ? r.status === 200 : graphqlOk(r)));
  t.ok(healthy.length > 20, `load before the outage: ${healthy.length} requests`);
  t.same(healthyFailures.map(describeResult), [], "before the outage every request succeeds");

  // Outage: the postmaster gets SIGINT (fast shutdown: open sessions are aborted).
  const stoppingAt = Date.now();
  await db.stop();
  const downAt = Date.now();
  t.equal(db.pid(), undefined, "Postgres is down");
  await sleep(1000);
  // The process is up and GraphQL that needs no database still answers.
  t.equal(server.child.exitCode, null, "the server process is still running");
  if (server.child.exitCode !== null) t.comment(`server output:\n${server.output().slice(-4000)}`);
  const typename = await gql(server.url, "{ __typename }");
  t.same({ status: typename.status, body: typename.body }, { status: 200, body: { data: { __typename: "Query" } } }, "{ __typename } answers 200 while Postgres is down");
  // A player whose identity cannot be checked: 503 with Retry-After (adapters/auth.ts).
  const whoami = await fetch(`${server.url}/whoami`, { headers: player.header });
  t.equal(whoami.status, 503, "an identity lookup during the outage answers 503");
  t.equal(whoami.headers.get("retry-after"), "1", "with Retry-After");
  t.match(await whoami.json(), { message: /database is unavailable/ });
  // The same for a WebSocket upgrade carrying the credential in its Authorization header.
  const upgrade = await new Promise<{ status: number; retryAfter: unknown; body: string }>((resolve, reject) => {
    const ws = new WebSocket(`${server.url.replace(/^http/, "ws")}/graphql`, "graphql-transport-ws", { headers: player.header });
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (chunk: Buffer) => (body += chunk.toString()));
      res.once("end", () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers["retry-after"], body }));
    });
    ws.once("open", () => reject(new Error("upgraded while the credential could not be checked")));
    ws.once("error", () => undefined);
  });
  t.match(upgrade, { status: 503, retryAfter: "1", body: /"code":"DATABASE_UNAVAILABLE".*database is unavailable/ }, "a WebSocket upgrade during the outage: 503 with Retry-After");
  const anon = await gql(server.url, "{ allHubCasinos { totalCount } }");
  t.equal(anon.status, 200, "an anonymous database query during the outage: HTTP 200 …");
  t.ok((anon.body.errors?.length ?? 0) > 0, "… with a GraphQL error");
  t.comment(`anonymous query during the outage: ${JSON.stringify(anon.body)}`);
  // Enough of the load sent during the outage to judge it (a count, not a time).
  await waitFor("20 requests of the load sent during the outage", 60_000, async () => load.results.filter((r) => r.sentAt >= downAt).length > 20);
  // The load stops while Postgres is still down: a request that waited for the
  // database instead of failing would hold this until the load's own 30 s
  // timeout, and show as unanswered below.
  await load.stop();
  const restartAt = Date.now();

  // Every request sent while Postgres was down failed cleanly, before it came back.
  const during = load.results.filter((r) => r.sentAt >= downAt);
  t.ok(during.length > 20, `load during the outage: ${during.length} requests`);
  t.same(during.filter((r) => r.error !== undefined).map(describeResult), [], "no request went unanswered (no reset, no timeout)");
  t.ok(during.every((r) => r.doneAt <= restartAt), "every one was answered while Postgres was still down");
  t.comment(`slowest answer during the outage: ${Math.max(...during.map((r) => r.doneAt - r.sentAt))} ms (not asserted)`);
  const acceptable = (r: LoadResult): boolean => {
    if (r.status === 503) return true; // identity lookup failed, or /health reporting the database down
    if (r.kind === "health" || r.kind === "whoami") return false;
    // A GraphQL error, never data as if nothing happened.
    return r.status === 200 && Array.isArray(r.body?.errors) && r.body.errors.length > 0 && typeof r.body.errors[0].message === "string";
  };
  t.same(during.filter((r) => !acceptable(r)).map(describeResult), [], "each one: a GraphQL error (HTTP 200) or a 503");
  t.ok(during.some((r) => r.kind === "player" && r.status === 503), "player requests get 503: their identity cannot be checked");
  t.ok(during.some((r) => r.kind === "anonymous" && r.status === 200), "anonymous GraphQL requests get a GraphQL error");
  t.comment(`outage outcomes: ${JSON.stringify(tally(during, (r) => `${r.kind} ${r.status ?? r.error}`))}`);
  const messages = new Set(during.flatMap((r) => (Array.isArray(r.body?.errors) ? r.body.errors.map((e: { message: string }) => e.message.replace(/reference [0-9a-f]+/, "reference …")) : [])));
  t.comment(`GraphQL error messages during the outage: ${JSON.stringify([...messages])}`);
  // "A clear GraphQL error": the client must be able to tell a database outage
  // (retry shortly) from a bug. Today a lost database is masked like any other
  // unexpected error ("Internal error (reference …)", code INTERNAL_SERVER_ERROR);
  // see the report of issue 7 for the proposed fix in src/graphql/mask-error.ts (makeMaskError).
  const anonError = anon.body.errors?.[0];
  t.match(
    { message: anonError?.message, code: anonError?.extensions?.code },
    { message: /database/i, code: /^(?!INTERNAL_SERVER_ERROR$)/ },
    "the GraphQL error says the database is unavailable (not a generic internal error)",
  );
  const straddling = load.results.filter((r) => r.sentAt >= stoppingAt && r.sentAt < downAt);
  t.same(straddling.filter((r) => r.error !== undefined).map(describeResult), [], "requests in flight when Postgres stopped were answered too, before it came back");

  // Postgres returns on the same port: the server recovers by itself.
  await db.start();
  const upAt = Date.now();
  const recovering = startLoad(server.url, { concurrency: 6, next: (w, n) => mix[(w + n) % mix.length]!(n), timeoutMs: 30_000, errorPauseMs: 50 });
  t.teardown(() => recovering.stop());
  const recoveredIn = await waitFor("the server serves database queries again", 60_000, async () => {
    const a = await gql(server.url, "{ allHubCasinos { totalCount } }");
    const p = await gql(server.url, "{ hubCurrentUser { id } }", undefined, player.header);
    return a.body.errors === undefined && (p.body.data as any)?.hubCurrentUser?.id === player.userId;
  });
  t.pass(`database queries and sessions work again ${recoveredIn} ms after Postgres came back`);
  await waitFor("20 answers to the load after recovery", 60_000, async () => recovering.results.filter((r) => r.sentAt >= upAt + recoveredIn).length > 20);
  const after = recovering.results.filter((r) => r.sentAt >= upAt + recoveredIn);
  t.ok(after.length > 20, `load after recovery: ${after.length} requests`);
  t.same(after.filter((r) => !(r.kind === "health" || r.kind === "whoami" ? r.status === 200 : graphqlOk(r))).map(describeResult), [], "after recovery every request succeeds again");
  await recovering.stop();

  // The LISTEN connection (live updates and credential changes) reconnected too: with a 60 s identity cache,
  // only its notification can make a revocation take effect at once.
  await waitFor("the LISTEN connection is back", 60_000, () =>
    withPool(db.superuserUrl, async (pool) => (await pool.query("select 1 from pg_stat_activity where application_name = 'hub:live-notifications'")).rowCount === 1),
  );
  t.same(await (await fetch(`${server.url}/whoami`, { headers: player.header })).json(), { kind: "user" }, "the session is cached as valid");
  await withPool(db.superuserUrl, (pool) => pool.query("update hub.session set revoked_at = now() where id = $1", [player.sessionId]));
  // Bounded well inside the 60 s cache TTL: only the notification can make it happen that soon.
  const refusedIn = await waitFor("the revoked session is refused while its cache entry (60 s) still holds it", 45_000, async () => ((await (await fetch(`${server.url}/whoami`, { headers: player.header })).json()) as { kind: unknown }).kind === null);
  t.pass(`a session revoked after the outage was refused within ${refusedIn} ms (cache TTL 60 s): the listener reconnected`);

  t.equal(server.child.exitCode, null, "the server never exited");
  t.notMatch(server.output(), /uncaught|unhandled/i, "no uncaught exception or unhandled rejection logged");
  server.child.kill("SIGTERM");
  t.equal(await server.exited, 0, "and it stops cleanly afterwards");
  await db.stop();
});

// ---------------------------------------------------------------------------

t.test("SIGTERM under load: stops accepting, finishes in-flight bets, closes pools and Postgres, exits 0; no bet lost or half-written", async (t) => {
  const dataDir = tmpDir(t, "hub-faults-sigterm-");
  // If the test fails midway, the server is SIGKILLed: stop the Postgres it started on our data dir too.
  t.teardown(() => stopPostmasterOf(path.join(dataDir, "pg")));
  const server = await startServerProcess({ HUB_DATA_DIR: dataDir });
  t.teardown(() => server.child.kill("SIGKILL"));
  const clusterDir = path.join(dataDir, "pg");
  const postmaster = readPostmasterPid(clusterDir)!.pid;
  let su = superuserUrl(dataDir);
  const flipper = await makePlayer(su, "sigterm-flipper");
  const better = await makePlayer(su, "sigterm-better");
  const STARTING_BALANCE = 100_000;
  const STARTING_BANKROLL = 10_000_000;
  const before = await withPool(su, async (pool) => {
    await pool.query("select hub_hidden.credit_balance($1, $2, $3, 'HOUSE', $4, 'faults-test', 'funding for the SIGTERM test')", [
      better.userId, better.casinoId, better.experienceId, STARTING_BALANCE,
    ]);
    await pool.query("select hub_hidden.ensure_bankroll($1, 'HOUSE', $2, 'funding for the SIGTERM test', 'faults-test')", [better.casinoId, STARTING_BANKROLL]);
    const bankroll = (await pool.query("select amount, bets, wagered from hub.bankroll where casino_id = $1 and currency_key = 'HOUSE'", [better.casinoId])).rows[0];
    return { bankroll: { amount: Number(bankroll.amount), bets: Number(bankroll.bets), wagered: Number(bankroll.wagered) } };
  });

  const FLIP = "mutation($w: Float!) { makeCoinflip(input: { currency: \"HOUSE\", wager: $w }) { id wager net userId } }";
  const BET = "mutation($w: Float!, $s: CoinSide!) { makeCoinflipBet(input: { currency: \"HOUSE\", wager: $w, side: $s }) { bet { id wager net } outcome balance } }";
  // Half the workers flip (independent rows), half bet on one balance and one
  // bankroll (serialised by their row locks, so several wait in the database
  // at any moment: those are the in-flight requests the shutdown must finish).
  const load = startLoad(server.url, {
    concurrency: 8,
    timeoutMs: 30_000,
    next: (w, n) =>
      w % 2 === 0
        ? { kind: "flip", headers: flipper.header, body: gqlBody(FLIP, { w: 1 + ((w + n) % 5) }) }
        : { kind: "bet", headers: better.header, body: gqlBody(BET, { w: 2 + ((w + n) % 3), s: n % 2 === 0 ? "HEADS" : "TAILS" }) },
  });
  t.teardown(() => load.stop());
  await waitFor("20 answers to the load before SIGTERM", 60_000, async () => load.results.length > 20);
  const warm = load.results.slice();
  t.same(warm.filter((r) => !graphqlOk(r)).map(describeResult), [], `before SIGTERM every request succeeds (${warm.length} sent)`);

  const inFlightAtSignal = load.inFlight();
  const signalAt = Date.now();
  server.child.kill("SIGTERM");
  const code = await exitedWithin(server.exited, 120_000, "the server to exit after SIGTERM (its shutdown timeout is 10 s)");
  const exitedAt = Date.now();
  await load.stop();
  t.equal(code, 0, `exits 0 on SIGTERM (${exitedAt - signalAt} ms after the signal, not asserted; ${inFlightAtSignal} requests in flight at the signal)`);
  t.notOk(isAlive(postmaster), "the embedded Postgres it started is stopped");
  t.match(server.output(), /embedded Postgres stopped/);
  t.notMatch(server.output(), /terminating connection due to administrator command|connection lost|did not finish in time/, "pools closed before Postgres stopped; no request was cut off");
  t.notMatch(server.output(), /"level":(50|60)/, "nothing logged at error or fatal level");

  const results = load.results;
  const answeredAfterSignal = results.filter((r) => r.sentAt < signalAt && r.doneAt >= signalAt && graphqlOk(r));
  t.ok(answeredAfterSignal.length >= 1, `requests in flight at SIGTERM were finished: ${answeredAfterSignal.length} answered 200 after the signal`);
  // Anything else is a refusal: 503 (return503OnClosing) or a closed/refused connection; never a GraphQL error.
  t.same(results.filter((r) => !graphqlOk(r) && r.status !== 503 && r.error === undefined).map(describeResult), [], "no request failed with an error response: 200 with data, 503 or refused");
  // Stops accepting: once one request was refused, nothing sent later was served.
  const firstRefusal = results.filter((r) => !graphqlOk(r)).reduce((min, r) => Math.min(min, r.doneAt), Infinity);
  t.ok(Number.isFinite(firstRefusal), "requests after the close were refused");
  t.same(results.filter((r) => r.sentAt > firstRefusal && graphqlOk(r)).map(describeResult), [], "no request sent after the first refusal was served");
  t.comment(`outcomes: ${JSON.stringify(tally(results, (r) => `${r.kind} ${graphqlOk(r) ? "ok" : (r.status ?? r.error)}`))}`);

  // A fresh start on the same data dir: the books must match the responses exactly.
  const again = await startServerProcess({ HUB_DATA_DIR: dataDir });
  t.teardown(() => again.child.kill("SIGKILL"));
  su = superuserUrl(dataDir);
  await withPool(su, async (pool) => {
    const flipsOk = new Map(results.filter((r) => r.kind === "flip" && graphqlOk(r)).map((r) => [r.body.data.makeCoinflip.id as string, r.body.data.makeCoinflip]));
    const flipRows = (await pool.query("select id, wager, net, user_id from app.coinflip where user_id = $1", [flipper.userId])).rows;
    t.same(
      [...flipsOk.values()].filter((f) => !flipRows.some((row) => row.id === f.id && row.wager === f.wager && row.net === f.net)).map((f) => f.id),
      [],
      `every makeCoinflip answered 200 is stored as answered (${flipsOk.size})`,
    );
    t.same(flipRows.filter((row) => !flipsOk.has(row.id)).map((row) => row.id), [], "no coinflip row without a 200 response");

    const betsOk = new Map(results.filter((r) => r.kind === "bet" && graphqlOk(r)).map((r) => [r.body.data.makeCoinflipBet.bet.id as string, r.body.data.makeCoinflipBet]));
    const betRows = (await pool.query("select id, wager, net, balance_after from app.coinflip_bet where user_id = $1", [better.userId])).rows;
    t.same(
      [...betsOk.values()].filter((b) => !betRows.some((row) => row.id === b.bet.id && row.wager === b.bet.wager && row.net === b.bet.net && row.balance_after === b.balance)).map((b) => b.bet.id),
      [],
      `every makeCoinflipBet answered 200 is stored as answered, with the balance it reported (${betsOk.size})`,
    );
    t.same(betRows.filter((row) => !betsOk.has(row.id)).map((row) => row.id), [], "no coinflip_bet row without a 200 response");

    // The money: balance, bankroll and ledger all agree with the stored bets.
    const sumNet = betRows.reduce((s, row) => s + Number(row.net), 0);
    const sumWager = betRows.reduce((s, row) => s + Number(row.wager), 0);
    const balance = Number((await pool.query("select amount from hub.balance where user_id = $1 and experience_id = $2 and currency_key = 'HOUSE'", [better.userId, better.experienceId])).rows[0].amount);
    const bankroll = (await pool.query("select amount, bets, wagered from hub.bankroll where casino_id = $1 and currency_key = 'HOUSE'", [better.casinoId])).rows[0];
    const ledgerPlayer = Number((await pool.query("select sum(amount_delta) as s from hub.ledger where account = 'player' and user_id = $1 and experience_id = $2 and currency_key = 'HOUSE'", [better.userId, better.experienceId])).rows[0].s);
    const ledgerHouse = Number((await pool.query("select sum(amount_delta) as s from hub.ledger where account = 'house' and casino_id = $1 and currency_key = 'HOUSE'", [better.casinoId])).rows[0].s);
    const close = (a: number, b: number) => Math.abs(a - b) < 1e-6;
    t.ok(close(balance, STARTING_BALANCE + sumNet), `balance ${balance} = funding ${STARTING_BALANCE} + Σ net ${sumNet}`);
    t.ok(close(Number(bankroll.amount), before.bankroll.amount - sumNet), `bankroll ${bankroll.amount} = ${before.bankroll.amount} − Σ net`);
    t.equal(Number(bankroll.bets), before.bankroll.bets + betRows.length, "bankroll.bets counts every stored bet once");
    t.ok(close(Number(bankroll.wagered), before.bankroll.wagered + sumWager), "bankroll.wagered sums every stored wager");
    t.ok(close(ledgerPlayer, balance), `the player's ledger sums to the balance (${ledgerPlayer})`);
    t.ok(close(ledgerHouse, Number(bankroll.amount)), `the house ledger sums to the bankroll (${ledgerHouse})`);
  });
  again.child.kill("SIGINT");
  t.equal(await again.exited, 0, "the fresh start stops cleanly too");
});

// ---------------------------------------------------------------------------

/**
 * Open a raw connection, write `text`, then stall (write nothing more). Resolves
 * with what the server sent and how long until it closed the connection, or
 * gave up after `giveUpMs`.
 */
function stall(port: number, text: string, giveUpMs: number): Promise<{ ms: number; received: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    let received = "";
    const socket = net.connect(port, "127.0.0.1", () => socket.write(text));
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ ms: Date.now() - started, received, closed: false });
    }, giveUpMs);
    socket.on("data", (chunk) => (received += chunk.toString()));
    socket.on("error", (error) => {
      if ((error as NodeJS.ErrnoException).code !== "ECONNRESET") reject(error);
    });
    socket.on("close", () => {
      clearTimeout(timer);
      resolve({ ms: Date.now() - started, received, closed: true });
    });
  });
}

const TIMEOUTS_CONFIG = path.join(ROOT, "test/fixtures/config-faults-timeouts.mjs");

t.test("timeouts: statement_timeout ends a slow GraphQL query with a GraphQL error; a stalled request body gets 408 or is closed", async (t) => {
  // A database of the test kit's shared cluster: nothing here is about the embedded Postgres.
  // statementTimeoutMs: 500, requestTimeoutMs: 1000 (test/fixtures/config-faults-timeouts.mjs)
  const server = await startServerProcess({ ...(await sharedClusterDatabase(t)), HUB_CONFIG: TIMEOUTS_CONFIG });
  t.teardown(() => server.child.kill("SIGKILL"));
  const port = Number(new URL(server.url).port);

  const quick = await gql(server.url, "{ slow(seconds: 0.05) }");
  t.same(quick.body, { data: { slow: 1 } }, "a query under the statement timeout answers normally");

  // 30 s of pg_sleep against a 500 ms statement_timeout, more of them than the
  // GraphQL pool has connections (20): each must end quickly with an error.
  const started = Date.now();
  const slow = await Promise.all(Array.from({ length: 25 }, () => sendOnce(server.url, { kind: "slow", body: gqlBody("{ slow(seconds: 30) }") }, 40_000)));
  // Ended by the timeout, not by finishing: each is answered before its 30 s sleep could have ended.
  t.same(slow.filter((r) => r.error !== undefined || r.doneAt - r.sentAt >= 30_000).map(describeResult), [], "25 concurrent 30-second queries were each answered before their sleep could end");
  t.same(slow.filter((r) => r.body?.errors?.[0]?.extensions?.code !== "STATEMENT_TIMEOUT").map(describeResult), [], "each one ended by the statement timeout (code STATEMENT_TIMEOUT)");
  t.comment(`all 25 answered in ${Date.now() - started} ms (not asserted)`);
  t.same(
    slow.filter((r) => !(r.status === 200 && r.body?.data?.slow === null && typeof r.body?.errors?.[0]?.message === "string")).map(describeResult),
    [],
    "each one: HTTP 200, slow: null and a GraphQL error",
  );
  t.comment(`what the client sees: ${JSON.stringify(slow[0]?.body)}`);
  t.match(slow[0]?.body?.errors?.[0], { message: /statement timeout/, extensions: { code: "STATEMENT_TIMEOUT" } }, "the client is told it was the statement timeout");
  await waitFor("the server log names the statement timeout", 30_000, async () => /canceling statement due to statement timeout/.test(server.output()));
  t.pass("the server log has Postgres's reason (canceling statement due to statement timeout)");
  t.same((await gql(server.url, "{ slow(seconds: 0.05) }")).body, { data: { slow: 1 } }, "the pool's connections are usable afterwards");

  // Request timeout: headers sent, then 10 of the 100 announced body bytes, then nothing.
  const body = await stall(
    port,
    "POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"query\":",
    20_000,
  );
  t.comment(`stalled body: closed=${body.closed} after ${body.ms} ms, received ${JSON.stringify(body.received.split("\r\n")[0])}`);
  // Node's own limits (60 s for headers, 300 s for a request) would not have closed it before the test gave up (20 s).
  t.ok(body.closed, "the server ended the connection of a request whose body never completed, before the test gave up (20 s)");
  t.ok(body.received === "" || /^HTTP\/1\.1 408/.test(body.received), "with a 408 or nothing");
  // The same for headers that never end (slowloris).
  const headers = await stall(port, "GET /graphql?query=%7B__typename%7D HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", 20_000);
  t.comment(`stalled headers: closed=${headers.closed} after ${headers.ms} ms, received ${JSON.stringify(headers.received.split("\r\n")[0])}`);
  t.ok(headers.closed, "a request whose headers never end is closed too, before the test gave up (20 s)");
  t.ok(headers.received === "" || /^HTTP\/1\.1 408/.test(headers.received), "with a 408 or nothing");

  // The request timeout bounds receiving a request, not producing the answer.
  const slowAnswer = await sendOnce(server.url, { kind: "slow-answer", method: "GET", path: "/slow-answer" }, 20_000);
  t.same({ status: slowAnswer.status, body: slowAnswer.body }, { status: 200, body: { answered: true } }, "a route answering after 2.5 s (> requestTimeoutMs) still answers 200");
  t.same((await gql(server.url, "{ __typename }")).body, { data: { __typename: "Query" } }, "the server still answers");
  server.child.kill("SIGTERM");
  t.equal(await server.exited, 0, "exits 0 on SIGTERM");
});

t.test("shutdown timeout: a request stuck in an Express route does not hold the shutdown beyond shutdownTimeoutMs", async (t) => {
  const dataDir = tmpDir(t, "hub-faults-shutdown-");
  // If the test fails midway, the server is SIGKILLed: stop the Postgres it started on our data dir too.
  t.teardown(() => stopPostmasterOf(path.join(dataDir, "pg")));
  // shutdownTimeoutMs: 1000; GET /stuck never answers (test/fixtures/config-faults-timeouts.mjs)
  const server = await startServerProcess({ HUB_DATA_DIR: dataDir, HUB_CONFIG: TIMEOUTS_CONFIG });
  t.teardown(() => server.child.kill("SIGKILL"));
  const postmaster = readPostmasterPid(path.join(dataDir, "pg"))!.pid;

  const stuck = sendOnce(server.url, { kind: "stuck", method: "GET", path: "/stuck" }, 60_000);
  await waitFor("the stuck request reached its route", 30_000, async () => ((await (await fetch(`${server.url}/stuck-count`)).json()) as { stuck: number }).stuck === 1);
  const signalAt = Date.now();
  server.child.kill("SIGTERM");
  const code = await exitedWithin(server.exited, 120_000, "the server to exit after SIGTERM (its shutdown timeout is 1 s)");
  const tookMs = Date.now() - signalAt;
  t.equal(code, 0, "exits 0");
  t.ok(tookMs >= 900, `it waited for the stuck request first, about shutdownTimeoutMs (stopped ${tookMs} ms after SIGTERM)`);
  // The stuck request would hold the shutdown forever: that it exited at all, saying so, is the cut.
  t.match(server.output(), /"timeoutMs":1000[^\n]*in-flight requests did not finish in time; closing their connections/, "the log says a connection was cut, at the configured timeout (1000 ms)");
  const stuckResult = await stuck;
  t.ok(stuckResult.error !== undefined || stuckResult.status === 503, `the stuck client saw its connection closed (${describeResult(stuckResult)})`);
  t.notOk(isAlive(postmaster), "the embedded Postgres was stopped too");
  t.match(server.output(), /embedded Postgres stopped/);
});
