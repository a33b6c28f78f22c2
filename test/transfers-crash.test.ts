/**
 * Transfers when the hub or Postgres fails: SIGKILL of a hub process between
 * "transfer sent" and "result recorded", two hub processes on one database
 * polling the same casino, and Postgres restarted in the middle of a burst of
 * deposits and withdrawals. Each ends with the simulated casino's ledger and
 * the hub's agreeing to the unit and nothing pending.
 */
import "./helpers/env.js";
import path from "node:path";
import t from "tap";
import pg from "pg";
import { startAndListen } from "@hubpkg/hub";
import { gql } from "./helpers/http.js";
import { makeOperator } from "./helpers/credentials.js";
import { createSession, ensureUserAndExperience } from "../dist/src/auth/credentials.js";
import { tmpDir } from "./helpers/tmp.js";
import { casinoAndDatabase, hubProcess, settled } from "./helpers/transfer-processes.js";
import { startExternalPostgres } from "./helpers/external-postgres.js";
import { startSimCasino } from "./helpers/sim-casino.js";
import { addSimCasino, FAST_TRANSFERS, ok, sleep, waitFor } from "./helpers/transfers.js";

const WITHDRAW = "mutation($a: Float!) { hubWithdraw(input: { currencyKey: \"BTC\", amount: $a }) { withdrawalRequest { id } } }";
const RECORD = "mutation($i: HubRecordDepositInput!) { hubRecordDeposit(input: $i) { created } }";

t.test("SIGKILL of the hub after the casino applied a withdrawal and before the hub recorded it: after a restart it completes exactly once", async (t) => {
  const dir = tmpDir(t, "hub-transfers-kill-");
  const { casino, server, operator, casinoId } = await casinoAndDatabase(t, { poll: false });
  casino.fund("alice", "BTC", 1000);
  const mp = casino.deposit("alice", "BTC", 1000);
  await ok(server.url, operator, RECORD, { i: { casinoId, mpTransferId: mp, uname: "alice", experience: "main", currencyKey: "BTC", amount: 1000 } });
  const { rows } = await server.dbPool.query<{ id: string; experience_id: string }>("select u.id, e.id as experience_id from hub.user u, hub.experience e where u.uname = 'alice' and e.name = 'main' and e.casino_id = u.casino_id");
  const { token } = await server.authenticate(rows[0]!.id, rows[0]!.experience_id);
  const alice = { authorization: `session:${token}` };

  const first = await hubProcess(t, server, dir);
  casino.failNext("outgoing", { kind: "hold" });
  const held = new Promise<void>((resolve) => casino.once("held", () => resolve()));
  const { hubWithdraw } = await ok(server.url, alice, WITHDRAW, { a: 300 });
  const id = hubWithdraw.withdrawalRequest.id as string;
  await held;
  t.equal(casino.outgoing.get(id)?.status, "COMPLETED", "the casino applied the transfer and has not answered yet");
  first.child.kill("SIGKILL");
  await first.exited;
  casino.release();
  const { rows: before } = await server.dbPool.query("select status from hub.withdrawal where withdrawal_request_id = $1", [id]);
  t.equal(before[0].status, "PENDING", "the hub died before recording the result");

  const second = await hubProcess(t, server, dir);
  await waitFor("completed by the restarted hub", 15_000, async () => {
    const { rows } = await server.dbPool.query("select status from hub.withdrawal where withdrawal_request_id = $1", [id]);
    return rows[0].status === "COMPLETED";
  });
  t.equal(casino.balance("alice", "BTC"), 300, "the casino paid it once");
  t.equal([...casino.outgoing.keys()].filter((k) => k === id).length, 1, "under one key");
  const data = await ok(server.url, alice, "query { hubCurrentUser { hubBalanceByCurrency(currency: \"BTC\") { amount } } }");
  t.equal(data.hubCurrentUser.hubBalanceByCurrency.amount, 700, "the hub debited it once");
  await settled(t, server.superuserDatabaseUrl, casinoId, casino);
  second.child.kill("SIGTERM");
  await second.exited;
});

t.test("two hub processes on one database polling the same casino: every transfer credited once, every withdrawal paid once", async (t) => {
  const dir = tmpDir(t, "hub-transfers-two-");
  const { casino, server, operator, casinoId } = await casinoAndDatabase(t, { poll: true });
  const hubs = await Promise.all([hubProcess(t, server, dir), hubProcess(t, server, dir)]);
  casino.duplicateIncoming = true;

  const players = ["p1", "p2", "p3", "p4"];
  for (const p of players) casino.fund(p, "BTC", 100_000);
  let deposited = 0;
  for (let i = 0; i < 60; i++) {
    const amount = 10 + i;
    casino.deposit(players[i % players.length]!, "BTC", amount);
    deposited += amount;
    if (i % 10 === 9) await sleep(60);
  }
  await waitFor("every incoming transfer acknowledged", 20_000, async () => casino.incoming.every((x) => x.acked));
  // Withdrawals through both processes' GraphQL.
  const { rows } = await server.dbPool.query<{ id: string; uname: string; experience_id: string }>(
    "select u.id, u.uname, e.id as experience_id from hub.user u join hub.experience e on e.casino_id = u.casino_id and e.name = 'main' where u.casino_id = $1",
    [casinoId],
  );
  const sessions = await Promise.all(rows.map(async (r) => ({ uname: r.uname, headers: { authorization: `session:${(await server.authenticate(r.id, r.experience_id)).token}` } })));
  const results = await Promise.all(
    sessions.flatMap((s, i) => [1, 2, 3].map((n) => gql(hubs[(i + n) % 2]!.url, WITHDRAW, { a: n * 5 }, s.headers))),
  );
  t.same(results.filter((r) => r.body.errors).map((r) => r.body.errors), [], "every withdrawal accepted");
  const totals = await settled(t, server.superuserDatabaseUrl, casinoId, casino);
  t.equal(totals.totals.deposits, deposited, `${deposited} units deposited, each transfer once, though delivered at least twice`);
  // A send the casino receives after its expiresAt is refused ("expired") and refunded: on this
  // loaded machine that can happen, and it is a correct outcome; anything else must have completed.
  const expired = [...casino.outgoing.values()].filter((o) => o.status === "REFUSED" && o.reason === "expired");
  t.equal(casino.outgoing.size, players.length * 3, "the casino saw each withdrawal's key once");
  t.same([...casino.outgoing.values()].filter((o) => o.status === "REFUSED" && o.reason !== "expired"), [], "none refused for another reason");
  t.equal(totals.totals.withdrawals + expired.reduce((n, o) => n + o.amount, 0), players.length * 30, `every withdrawal completed (${expired.length} arrived after their expiry and were refunded)`);
  const { rows: count } = await server.dbPool.query<{ n: number }>("select count(*)::int as n from hub.deposit where casino_id = $1", [casinoId]);
  t.equal(count[0]!.n, 60, "60 deposits for 60 transfers");
});

t.test("Postgres restarted in the middle of a burst of deposits and withdrawals: the books agree at the end, nothing stuck", async (t) => {
  const dir = tmpDir(t, "hub-transfers-pg-");
  // A cluster of its own: the test stops and restarts Postgres, which the shared cluster's other users would feel.
  const db = await startExternalPostgres(t, path.join(dir, "pg-data"));
  const casino = await startSimCasino();
  t.teardown(() => casino.close());
  const hub = await startAndListen({
    port: 0,
    handleSignals: false,
    logLevel: "fatal",
    databaseUrl: db.authenticatorUrl,
    superuserDatabaseUrl: db.superuserUrl,
    transfers: FAST_TRANSFERS,
  });
  t.teardown(() => hub.stop());
  const operator = (await makeOperator(db.superuserUrl)).header;
  const casinoId = await addSimCasino(hub.url, operator, casino, { poll: true });
  const players = ["q1", "q2", "q3"];
  const pool = new pg.Pool({ connectionString: db.superuserUrl, max: 2 });
  pool.on("error", () => undefined);
  t.teardown(() => pool.end());
  const headers: Record<string, { authorization: string }> = {};
  for (const uname of players) {
    const { user, experience } = await ensureUserAndExperience(pool, { casinoId, uname, experienceName: "main" });
    const { token } = await createSession(pool, { userId: user.id, casinoId, experienceId: experience.id });
    headers[uname] = { authorization: `session:${token}` };
    casino.fund(uname, "BTC", 1_000_000);
  }

  // Some money in first, so withdrawals have something to take.
  for (const uname of players) casino.deposit(uname, "BTC", 5000);
  await waitFor("first deposits credited", 15_000, async () => casino.incoming.every((x) => x.acked));

  let stop = false;
  const outcomes: Record<string, number> = {};
  const count = (k: string) => (outcomes[k] = (outcomes[k] ?? 0) + 1);
  const burst = players.map(async (uname, i) => {
    for (let n = 0; !stop; n++) {
      // Pulled deposits, pushed deposits (retried with the same id until answered), withdrawals.
      casino.deposit(uname, "BTC", 7 + n);
      const pushed = casino.deposit(uname, "BTC", 3 + n);
      casino.incoming.find((x) => x.id === pushed)!.seq = -1; // pushed ones are not offered to the poll
      for (let tries = 0; tries < 200; tries++) {
        const r = await gql(hub.url, RECORD, { i: { casinoId, mpTransferId: pushed, uname, experience: "main", currencyKey: "BTC", amount: 3 + n } }, operator).catch(() => undefined);
        if (r?.body.data?.hubRecordDeposit) break;
        await sleep(50);
      }
      const w = await gql(hub.url, WITHDRAW, { a: 2 + ((n + i) % 5) }, headers[uname]).catch(() => undefined);
      count(w?.body.data?.hubWithdraw ? "withdrawal accepted" : `withdrawal refused: ${w?.body.errors?.[0]?.extensions?.code ?? "no answer"}`);
      await sleep(20);
    }
  });
  await sleep(800);
  await db.stop();
  t.comment("Postgres stopped");
  await sleep(1500);
  await db.start();
  t.comment("Postgres started again");
  await sleep(1200);
  stop = true;
  await Promise.all(burst);
  t.comment(`withdrawals during the burst: ${JSON.stringify(outcomes)}`);
  t.ok((outcomes["withdrawal accepted"] ?? 0) > 5, "withdrawals were accepted before and after the outage");
  await waitFor("every incoming transfer acknowledged", 20_000, async () => casino.incoming.filter((x) => x.seq > 0).every((x) => x.acked));
  await settled(t, db.superuserUrl, casinoId, casino);
});
