/**
 * Take requests when the hub fails: SIGKILL of a hub process after the casino
 * applied a take request's transfer and before the hub recorded it, and two hub
 * processes on one database fetching the same casino's take requests. Each ends
 * with the simulated casino's ledger and the hub's agreeing to the unit.
 */
import "./helpers/env.js";
import t from "tap";
import { tmpDir } from "./helpers/tmp.js";
import { casinoAndDatabase, hubProcess, settled } from "./helpers/transfer-processes.js";
import type { SimCasino } from "./helpers/sim-casino.js";
import { ok, waitFor } from "./helpers/transfers.js";

const DEPOSIT = "mutation($i: HubRecordDepositInput!) { hubRecordDeposit(input: $i) { created } }";

async function deposit(url: string, operator: Record<string, string>, casino: SimCasino, casinoId: string, uname: string, amount: number) {
  casino.fund(uname, "BTC", amount);
  const mpTransferId = casino.deposit(uname, "BTC", amount);
  await ok(url, operator, DEPOSIT, { i: { casinoId, mpTransferId, uname, experience: "main", currencyKey: "BTC", amount } });
}

t.test("SIGKILL of the hub after the casino applied a take request's transfer and before the hub recorded it: after a restart it completes exactly once", async (t) => {
  const dir = tmpDir(t, "hub-take-kill-");
  const { casino, server, operator, casinoId } = await casinoAndDatabase(t, { poll: false, takeRequests: false });
  await deposit(server.url, operator, casino, casinoId, "alice", 1000);

  const first = await hubProcess(t, server, dir);
  casino.failNext("takeTransfer", { kind: "hold" });
  const held = new Promise<void>((resolve) => casino.once("held", () => resolve()));
  const mpId = casino.requestTake("alice", "BTC", 300);
  await ok(server.url, operator, "mutation($i: HubRecordTakeRequestInput!) { hubRecordTakeRequest(input: $i) { created } }", {
    i: { casinoId, mpTakeRequestId: mpId, uname: "alice", experience: "main", currencyKey: "BTC", amount: 300 },
  });
  await held;
  t.equal(casino.takes.find((x) => x.id === mpId)?.status, "TRANSFERRED", "the casino applied the transfer and has not answered yet");
  first.child.kill("SIGKILL");
  await first.exited;
  casino.release();
  const { rows: before } = await server.dbPool.query("select status from hub.take_request where mp_take_request_id = $1", [mpId]);
  t.equal(before[0].status, "PROCESSING", "the hub died before recording the result");

  const second = await hubProcess(t, server, dir);
  // The dead worker's lease (3 × requestTimeoutMs + 5 s) ends first.
  await waitFor("completed by the restarted hub", 30_000, async () => {
    const { rows } = await server.dbPool.query("select status from hub.take_request where mp_take_request_id = $1", [mpId]);
    return rows[0].status === "COMPLETED";
  });
  t.equal(casino.balance("alice", "BTC"), 300, "the casino credited it once");
  const { rows: ledger } = await server.dbPool.query("select amount_delta from hub.ledger where reason like '%take request ' || $1 || '%'", [mpId]);
  t.same(ledger, [{ amount_delta: -300 }], "the hub reserved it once and never refunded it");
  await settled(t, server.superuserDatabaseUrl, casinoId, casino);
  second.child.kill("SIGTERM");
  await second.exited;
});

t.test("two hub processes fetching the same casino's take requests, each delivered twice: each reserved once and transferred once", async (t) => {
  const dir = tmpDir(t, "hub-take-two-");
  const { casino, server, operator, casinoId } = await casinoAndDatabase(t, { poll: false, takeRequests: true });
  const players = ["p1", "p2", "p3"];
  for (const p of players) await deposit(server.url, operator, casino, casinoId, p, 10_000);
  casino.duplicateIncoming = true;
  const hubs = await Promise.all([hubProcess(t, server, dir), hubProcess(t, server, dir)]);
  let asked = 0;
  for (let i = 0; i < 30; i++) {
    const amount = 10 + i;
    casino.requestTake(players[i % players.length]!, "BTC", amount);
    asked += amount;
  }
  // One that no balance covers, and a take of everything left.
  casino.requestTake("p1", "BTC", 1_000_000);
  casino.requestTake("p2", "BTC", null);
  await waitFor("every take request settled at the casino", 30_000, async () => casino.takes.every((x) => x.status !== "PENDING"));
  // The casino settles a transfer before the hub has recorded its answer.
  const processing = "select count(*)::int as n from hub.take_request where status = 'PROCESSING'";
  await waitFor("every take request's answer recorded by the hub", 30_000, async () => (await server.dbPool.query<{ n: number }>(processing)).rows[0]!.n === 0);
  const { rows } = await server.dbPool.query<{ n: number; reserved: number }>("select count(*)::int as n, sum(reserved_amount)::float8 as reserved from hub.take_request where status = 'COMPLETED'");
  const p2Rest = 10_000 - casino.takes.filter((x) => x.uname === "p2" && x.amount !== null).reduce((s, x) => s + x.amount!, 0);
  t.same(rows[0], { n: 31, reserved: asked + p2Rest }, "31 completed, each for its amount (the take of everything for p2's rest)");
  t.equal(casino.takes.filter((x) => x.status === "CONTROLLER_REJECTED").length, 1, "the uncovered one rejected");
  const { rows: dup } = await server.dbPool.query("select count(*)::int as n from hub.ledger where reason like 'take request %' group by reason having count(*) > 1");
  t.same(dup, [], "no take request reserved twice");
  await settled(t, server.superuserDatabaseUrl, casinoId, casino);
  for (const h of hubs) h.child.kill("SIGTERM");
  await Promise.all(hubs.map((h) => h.exited));
});
