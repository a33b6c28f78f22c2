import "./helpers/env.js";
import http from "node:http";
import path from "node:path";
import pg from "pg";
import t, { type Test } from "tap";
import { startTestServer, createPlayer, createExperience, createPlayerBalance, createHouseBankroll, createHashChain } from "@hubpkg/hub/test";
import { defaultPlugins } from "@hubpkg/hub";
import { CoinflipBetPlugin, configureReferenceRoutes, referenceMigrationsPath } from "@hubpkg/hub/plugins";
import { until } from "./helpers/ws.js";
import { ROOT, startServerProcess } from "./helpers/process.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import { createSession } from "../dist/src/auth/credentials.js";
import { ErrorCodes } from "../dist/src/errors.js";

/**
 * Keep-alive clients must not hold a shutdown: 150 bets in flight, each on
 * its own keep-alive connection that the client never closes. Once they are
 * answered, the server closes those connections itself and stop() finishes
 * without waiting for the shutdown timeout (set far beyond anything the test
 * waits for, so reaching it shows as a failure, not as slowness).
 */
const BETS = 150;
const SHUTDOWN_TIMEOUT_MS = 120_000;

/**
 * Holds the player's balance lock on a client of `pool`, so every bet waits for it in flight; `unlock`
 * commits or rolls back and gives the client back (the teardown rolls back if the test did not).
 */
async function holdBalanceLock(t: Test, pool: pg.Pool, userId: string): Promise<(how: "commit" | "rollback") => Promise<void>> {
  const locker = await pool.connect();
  let locked = true;
  const unlock = async (how: "commit" | "rollback") => {
    if (!locked) return;
    locked = false;
    await locker.query(how).finally(() => locker.release());
  };
  t.teardown(() => unlock("rollback"));
  await locker.query("begin");
  await locker.query("select 1 from hub.balance where user_id = $1 for update", [userId]);
  return unlock;
}

/**
 * Until all BETS bets are in flight, that is, received by the server: with a limit of BETS requests in
 * progress per player, a request that needs no database is refused 429 exactly then.
 */
async function untilAllInFlight(url: string, token: string): Promise<void> {
  const probe = async () =>
    (await fetch(`${url}/graphql`, { method: "POST", headers: { "content-type": "application/json", authorization: `session:${token}` }, body: '{"query":"{ __typename }"}' })).status;
  const probing = Date.now();
  for (let status = await probe(); status !== 429; status = await probe()) {
    if (Date.now() - probing > 60_000) throw new Error(`the server did not have all ${BETS} bets in progress within 60 s (the probe answered ${status})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test("stop() with bets in flight on keep-alive connections: answered, connections closed, no wait for the timeout", async (t) => {
  const server = await startTestServer({
    plugins: [...defaultPlugins, CoinflipBetPlugin],
    userDatabaseMigrationsPath: referenceMigrationsPath,
    extraPgSchemas: ["app"],
    // As the demo server runs: with Express routes (Node then makes its requests and responses from their classes).
    configureApp: configureReferenceRoutes,
    shutdownTimeoutMs: SHUTDOWN_TIMEOUT_MS,
    perIdentityConnections: 3,
    perIdentityQueue: BETS - 3,
  });
  let stopped = false;
  t.teardown(() => (stopped ? undefined : server.stop()));
  const casinoId = server.playgroundCasinoId;
  const user = await createPlayer(server.dbPool, { casinoId, uname: "keeper" });
  const exp = await createExperience(server.dbPool, { casinoId, name: "shutdown" });
  await createPlayerBalance(server.dbPool, { userId: user.id, experienceId: exp.id, currencyKey: "HOUSE", amount: 1_000_000 });
  await createHouseBankroll(server.dbPool, { casinoId, currencyKey: "HOUSE", amount: 100_000_000 });
  const { token } = await server.authenticate(user.id, exp.id);

  // One socket per bet, kept open by the client after its answer.
  const agent = new http.Agent({ keepAlive: true, keepAliveMsecs: 60_000, maxSockets: BETS });
  t.teardown(() => agent.destroy());
  const sockets = new Set<import("node:net").Socket>();
  let closedByServer = 0;
  let stopAt = Infinity;
  const body = JSON.stringify({
    query: "mutation($w: Float!) { makeCoinflipBet(input: { currency: \"HOUSE\", wager: $w, side: HEADS }) { balance } }",
    variables: { w: 10 },
  });
  const bet = () =>
    new Promise<{ status: number; body: string }>((resolve) => {
      const req = http.request(`${server.url}/graphql`, {
        method: "POST",
        agent,
        headers: { "content-type": "application/json", authorization: `session:${token}`, "content-length": Buffer.byteLength(body) },
      });
      req.on("socket", (socket) => {
        sockets.add(socket);
        socket.once("close", () => closedByServer++);
      });
      req.on("response", (res) => {
        let text = "";
        res.on("data", (c: Buffer) => (text += c.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      });
      req.on("error", (error: NodeJS.ErrnoException) => resolve({ status: 0, body: `${error.code ?? error.message} after ${Date.now() - stopAt} ms from stop()` }));
      req.end(body);
    });

  // Every bet waits for the lock, in flight, until the server is stopping. stop() ends dbPool, which waits
  // for the locking client: it goes back as soon as the lock is released.
  const unlock = await holdBalanceLock(t, server.dbPool, user.id);
  const answers = Array.from({ length: BETS }, bet);
  await untilAllInFlight(server.url, token);
  stopAt = Date.now();
  const stopping = server.stop().then(() => (stopped = true));
  await unlock("commit");
  const results = await Promise.all(answers);
  t.same(
    results.filter((r) => r.status !== 200 || !/"balance":\d/.test(r.body)).slice(0, 5),
    [],
    `every bet in flight at stop() was answered with its balance (${results.length})`,
  );
  await until(() => closedByServer === BETS, SHUTDOWN_TIMEOUT_MS / 2, () => `the server to close the ${BETS} keep-alive connections once their answers went out (${closedByServer} closed)`);
  t.pass("the server closed every keep-alive connection after its answer");
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    stopping,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`stop() had not finished ${SHUTDOWN_TIMEOUT_MS / 2} ms after the answers: it waits for connections the client keeps open`)), SHUTDOWN_TIMEOUT_MS / 2);
    }),
  ]).finally(() => clearTimeout(timer));
  t.ok(stopped, "stop() finished without the shutdown timeout cutting connections");
});

/**
 * The same as operators run it: `node dist/server.js` (HUB_CONFIG: a 60 s
 * shutdown timeout) gets SIGTERM with 150 hubMakeOutcomeBet in flight from a
 * keep-alive agent that never closes its sockets. Every bet is answered, none
 * reset, and the process exits before the shutdown timeout fires: the timer
 * below is that timeout, started at the signal, and the server's own log would
 * say it cut connections.
 */
t.test("SIGTERM to a server process with 150 outcome bets in flight on keep-alive connections: all answered, exit before the shutdown timeout", async (t) => {
  const SERVER_TIMEOUT_MS = 60_000; // test/fixtures/config-shutdown.mjs
  const db = await sharedClusterDatabase(t);
  const pool = new pg.Pool({ connectionString: db.SUPERUSER_DATABASE_URL, max: 2 });
  // Its database is dropped (with force) at the end: a client still ending then gets a FATAL the pool re-emits.
  pool.on("error", () => undefined);
  t.teardown(() => pool.end());
  const { rows: [casino] } = await pool.query<{ id: string }>("select id from hub.casino where is_playground order by id limit 1");
  const casinoId = casino!.id;
  const user = await createPlayer(pool, { casinoId, uname: "sigterm" });
  const exp = await createExperience(pool, { casinoId, name: "sigterm" });
  await createPlayerBalance(pool, { userId: user.id, experienceId: exp.id, currencyKey: "HOUSE", amount: 1_000_000 });
  await createHouseBankroll(pool, { casinoId, currencyKey: "HOUSE", amount: 100_000_000 });
  const chain = await createHashChain(pool, { userId: user.id, casinoId, experienceId: exp.id, maxIteration: 1000 });
  const { token } = await createSession(pool, { userId: user.id, casinoId, experienceId: exp.id });

  const server = await startServerProcess({ ...db, HUB_CONFIG: path.join(ROOT, "test/fixtures/config-shutdown.mjs") });
  let exitedAt = 0;
  void server.exited.then(() => (exitedAt = Date.now()));
  t.teardown(async () => {
    if (exitedAt === 0) server.child.kill("SIGKILL");
    await server.exited;
  });

  const agent = new http.Agent({ keepAlive: true, maxSockets: BETS });
  t.teardown(() => agent.destroy());
  let signalAt = Infinity;
  const body = JSON.stringify({
    query: "mutation($input: HubMakeOutcomeBetInput!) { hubMakeOutcomeBet(input: $input) { result { __typename ... on HubMakeOutcomeBetSuccess { bet { id } } } } }",
    variables: { input: { kind: "GENERAL", wager: 10, currency: "HOUSE", hashChainId: chain.id, clientSeed: "s", outcomes: [{ weight: 1, profit: 0.98 }, { weight: 1, profit: -1 }] } },
  });
  const bet = () =>
    new Promise<{ status: number; body: string }>((resolve) => {
      const req = http.request(`${server.url}/graphql`, {
        method: "POST",
        agent,
        headers: { "content-type": "application/json", authorization: `session:${token}`, "content-length": Buffer.byteLength(body) },
      });
      req.on("response", (res) => {
        let text = "";
        res.on("data", (c: Buffer) => (text += c.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      });
      req.on("error", (error: NodeJS.ErrnoException) => resolve({ status: 0, body: `${error.code ?? error.message} ${Date.now() - signalAt} ms after SIGTERM` }));
      req.end(body);
    });

  // Every bet waits for the lock, in flight, until the signal has been sent.
  const unlock = await holdBalanceLock(t, pool, user.id);
  const answers = Array.from({ length: BETS }, bet);
  await untilAllInFlight(server.url, token);

  signalAt = Date.now();
  server.child.kill("SIGTERM");
  let timeoutFired = false;
  const serverTimeout = setTimeout(() => (timeoutFired = true), SERVER_TIMEOUT_MS);
  t.teardown(() => clearTimeout(serverTimeout));
  // The signal is handled (the server stops accepting) before the bets go on.
  await until(() => /received signal/.test(server.output()), 30_000, () => "the server to log the signal");
  await unlock("commit");
  const results = await Promise.all(answers);
  const answeredAt = Date.now();
  const documented = new Set<string>(Object.keys(ErrorCodes));
  const played = results.filter((r) => r.status === 200 && r.body.includes('"HubMakeOutcomeBetSuccess"'));
  const refused = results.filter((r) => r.status !== 0 && !played.includes(r) && [...r.body.matchAll(/"code":"([A-Z_]+)"/g)].some((m) => documented.has(m[1]!)));
  t.same(results.filter((r) => r.status === 0).slice(0, 5), [], "no bet's connection was reset or cut");
  t.equal(played.length + refused.length, BETS, `every bet was answered: played or refused with a documented code (${played.length} played, ${refused.length} refused)`, {
    other: results.filter((r) => !played.includes(r) && !refused.includes(r)).slice(0, 3),
  });

  await until(() => exitedAt !== 0 || timeoutFired, SERVER_TIMEOUT_MS + 30_000, () => "the server process to exit (or its shutdown timeout to fire)");
  t.equal(timeoutFired, false, `the process exited before its ${SERVER_TIMEOUT_MS / 1000} s shutdown timeout would have fired, while the client still held its keep-alive sockets`);
  t.equal(await server.exited, 0, "exit status 0");
  t.notMatch(server.output(), /did not finish in time/, "the server did not have to cut connections");
  t.comment(`answers ${answeredAt - signalAt} ms after SIGTERM, exit ${exitedAt - answeredAt} ms after the last answer (not asserted)`);
});
