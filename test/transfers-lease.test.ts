import "./helpers/env.js";
import t, { type Test } from "tap";
import { startAndListen } from "@hubpkg/hub";
import { createPlayer, startTestServer, type TestServer } from "@hubpkg/hub/test";
import { gql } from "./helpers/http.js";
import { startSimCasino, type SimCasino } from "./helpers/sim-casino.js";
import { addSimCasino, FAST_TRANSFERS, ok, sleep, waitFor } from "./helpers/transfers.js";

/*
 * The transfer worker claims an item with a lease and calls the casino with
 * no transaction open: while a casino holds its answer, the worker's
 * connections are idle (none "idle in transaction"), the item names its
 * worker, a refund is refused as in progress, and the answer is recorded once
 * the casino gives it. An item leased by a worker that died is left alone
 * until its lease ends, then taken and completed by another.
 */

const WITHDRAW = "mutation($a: Float!) { hubWithdraw(input: { currencyKey: \"BTC\", amount: $a }) { withdrawalRequest { id } } }";
const REFUND = "mutation($id: UUID!) { hubRefundWithdrawal(input: { withdrawalRequestId: $id }) { withdrawal { status } } }";

async function setUp(t: Test, worker: boolean): Promise<{ server: TestServer; casino: SimCasino; operator: Record<string, string>; alice: Record<string, string> }> {
  const casino = await startSimCasino();
  t.teardown(() => casino.close());
  const server = await startTestServer({ logLevel: "silent", transfers: worker ? FAST_TRANSFERS : { worker: false } });
  t.teardown(() => server.stop());
  const { apiKey } = await server.authenticateOperator();
  const operator = { authorization: `apikey:${apiKey}` };
  const casinoId = await addSimCasino(server.url, operator, casino, { poll: false });
  const user = await createPlayer(server.dbPool, { casinoId, uname: "alice" });
  const { rows } = await server.dbPool.query<{ id: string }>("insert into hub.experience (casino_id, name) values ($1, 'main') returning id", [casinoId]);
  await server.dbPool.query("select hub_hidden.credit_balance($1, $2, $3, 'BTC', 1000, 'test', 'test')", [user.id, casinoId, rows[0]!.id]);
  casino.fund("alice", "BTC", 0);
  const { token } = await server.authenticate(user.id, rows[0]!.id);
  return { server, casino, operator, alice: { authorization: `session:${token}` } };
}

const statusOf = async (server: TestServer, id: string) =>
  (await server.dbPool.query<{ status: string }>("select status from hub.withdrawal where withdrawal_request_id = $1", [id])).rows[0]!.status;

t.test("while the casino holds its answer, no transaction is open; the item is leased; a refund waits", async (t) => {
  const { server, casino, operator, alice } = await setUp(t, true);
  casino.failNext("outgoing", { kind: "hold" });
  const held = new Promise<void>((resolve) => casino.once("held", () => resolve()));
  const { hubWithdraw } = await ok(server.url, alice, WITHDRAW, { a: 300 });
  const id = hubWithdraw.withdrawalRequest.id as string;
  await held;

  const open = await server.dbPool.query(
    "select state from pg_stat_activity where application_name = 'hub:transfers' and datname = current_database() and state like 'idle in transaction%'",
  );
  t.same(open.rows, [], "no worker connection is inside a transaction during the casino's call");
  const { rows } = await server.dbPool.query<{ locked_by: string | null; leased: boolean }>(
    "select locked_by, locked_until > now() as leased from hub.transfer_job where withdrawal_request_id = $1",
    [id],
  );
  t.match(rows[0], { locked_by: /^hub:[0-9a-f-]{36}$/, leased: true }, "the item names its worker and its lease");
  const refused = await gql(server.url, REFUND, { id }, operator);
  t.equal(refused.body.errors?.[0]?.extensions?.code, "TRANSFER_IN_PROGRESS", "a refund is refused while the casino is being asked");

  casino.release();
  await waitFor("the withdrawal completed", 30_000, async () => (await statusOf(server, id)) === "COMPLETED");
  const after = await server.dbPool.query("select locked_by, locked_until from hub.transfer_job where withdrawal_request_id = $1", [id]);
  t.same(after.rows, [{ locked_by: null, locked_until: null }], "the lease ends with the recorded answer");
  t.equal(casino.balance("alice", "BTC"), 300, "the casino paid it once");
});

t.test("an item leased by a worker that died is taken once its lease ends, and completed once", async (t) => {
  const { server, casino, alice } = await setUp(t, false);
  const { hubWithdraw } = await ok(server.url, alice, WITHDRAW, { a: 200 });
  const id = hubWithdraw.withdrawalRequest.id as string;
  const LEASE_S = 3;
  const { rows } = await server.dbPool.query<{ until: number }>(
    `update hub.transfer_job set locked_by = 'hub:dead', locked_until = now() + make_interval(secs => $2), attempts = 1 where withdrawal_request_id = $1
     returning extract(epoch from locked_until)::float8 * 1000 as until`,
    [id, LEASE_S],
  );
  const leasedUntil = rows[0]!.until;
  const hub = await startAndListen({
    port: 0, handleSignals: false, logLevel: "silent",
    databaseUrl: server.databaseUrl, superuserDatabaseUrl: server.superuserDatabaseUrl, transfers: FAST_TRANSFERS,
  });
  t.teardown(() => hub.stop());
  // While the dead worker's lease lasts, the live worker leaves the item alone (it may look many times).
  while (Date.now() < leasedUntil - 500) {
    t.equal(casino.hits.outgoing + casino.hits.lookup, 0, "the casino is not called during another worker's lease");
    if (casino.hits.outgoing + casino.hits.lookup > 0) break;
    await sleep(250);
  }
  await waitFor("the withdrawal completed after the lease ended", 30_000, async () => (await statusOf(server, id)) === "COMPLETED");
  t.ok(Date.now() >= leasedUntil, "not before the lease ended");
  t.ok(casino.hits.lookup >= 1, "an attempt after an unknown one asks the casino first");
  t.equal(casino.balance("alice", "BTC"), 200, "paid once");
});
