/**
 * Deposits and withdrawals against a simulated casino (test/helpers/sim-casino.ts,
 * a real HTTP server with its own ledger): push and pull deposits, withdrawals,
 * each fault the casino can show, row-level security, and the operator's
 * retry and refund. Every test ends with the books reconciled to the unit.
 */
import "./helpers/env.js";
import t, { type Test } from "tap";
import { createExperience, createPlayer, startTestServer, type TestServer } from "@hubpkg/hub/test";
import type { CasinoConnector, ConnectorSettings } from "@hubpkg/hub";
import { gql } from "./helpers/http.js";
import { cliOn } from "./helpers/cli.js";
import { startSimCasino, type SimCasino } from "./helpers/sim-casino.js";
import { addSimCasino, FAST_TRANSFERS, ok, reconcile, waitFor } from "./helpers/transfers.js";

interface World {
  server: TestServer;
  casino: SimCasino;
  casinoId: string;
  operator: Record<string, string>;
}

async function world(t: Test, opts: { poll?: boolean } = {}): Promise<World> {
  const casino = await startSimCasino();
  t.teardown(() => casino.close());
  const server = await startTestServer({ transfers: FAST_TRANSFERS });
  t.teardown(() => server.stop());
  const { apiKey } = await server.authenticateOperator();
  const operator = { authorization: `apikey:${apiKey}` };
  const casinoId = await addSimCasino(server.url, operator, casino, { poll: opts.poll ?? true });
  return { server, casino, casinoId, operator };
}

/** A player of the casino with a session in its experience "main". */
async function player(w: World, uname: string) {
  const user = await createPlayer(w.server.dbPool, { casinoId: w.casinoId, uname });
  const { rows } = await w.server.dbPool.query<{ id: string }>(
    "insert into hub.experience (casino_id, name) values ($1, 'main') on conflict (casino_id, name) do update set name = excluded.name returning id",
    [w.casinoId],
  );
  const { token } = await w.server.authenticate(user.id, rows[0]!.id);
  return { userId: user.id, experienceId: rows[0]!.id, headers: { authorization: `session:${token}` } };
}

/** The player moves amount from the casino into the hub; the casino backend pushes it with hubRecordDeposit. */
async function pushDeposit(w: World, uname: string, amount: number): Promise<string> {
  w.casino.fund(uname, "BTC", amount);
  const id = w.casino.deposit(uname, "BTC", amount);
  await ok(w.server.url, w.operator, "mutation($i: HubRecordDepositInput!) { hubRecordDeposit(input: $i) { created } }", {
    i: { casinoId: w.casinoId, mpTransferId: id, uname, experience: "main", currencyKey: "BTC", amount },
  });
  return id;
}

const BALANCE = "query($c: String!) { hubCurrentUser { hubBalanceByCurrency(currency: $c) { amount } } }";
async function balanceOf(w: World, headers: Record<string, string>): Promise<number> {
  const data = await ok(w.server.url, headers, BALANCE, { c: "BTC" });
  return data.hubCurrentUser.hubBalanceByCurrency?.amount ?? 0;
}

const WITHDRAW = "mutation($a: Float!) { hubWithdraw(input: { currencyKey: \"BTC\", amount: $a }) { withdrawalRequest { id amount currencyKey userId mpTransferId } withdrawal { status } } }";
const WITHDRAWAL = "query($id: UUID!) { allHubWithdrawals(condition: { withdrawalRequestId: $id }) { nodes { status statusAt mpTransferId withdrawalRequestId amount } } }";

async function withdrawalStatus(w: World, requestId: string): Promise<{ status: string; mpTransferId: string | null }> {
  const data = await ok(w.server.url, w.operator, WITHDRAWAL, { id: requestId });
  return data.allHubWithdrawals.nodes[0];
}

async function settled(t: Test, w: World) {
  const result = await waitFor("every transfer settled", 15_000, async () => {
    const r = await reconcile(w.server.superuserDatabaseUrl, w.casinoId, w.casino);
    return r.pending === 0 && r.problems.length === 0 ? r : undefined;
  }).catch(async (error: Error) => {
    const r = await reconcile(w.server.superuserDatabaseUrl, w.casinoId, w.casino);
    t.comment(JSON.stringify(r));
    throw error;
  });
  t.same(result.problems, [], "the casino's ledger and the hub's agree, every balance equals its ledger sum");
  t.equal(result.pending, 0, "nothing is left pending");
  return result;
}

// ---------------------------------------------------------------- deposits

t.test("push: hubRecordDeposit credits once per transfer id, refuses a changed repeat loudly, and logs a put alert with the deposit", async (t) => {
  const w = await world(t, { poll: false });
  const alice = await player(w, "alice");
  // The put alerts of the alert log (core migration 0027) once sequenced: committed with the deposit, in order.
  let alerts: unknown[] = [];
  const readAlerts = async () =>
    (alerts = (
      await w.server.dbPool.query(
        `select user_id as "userId", casino_id as "casinoId", experience_id as "experienceId", payload->>'currencyKey' as "currencyKey",
                payload->>'mpTransferId' as "mpTransferId" from hub_hidden.live_alert where channel = 'put' and seq is not null order by seq`,
      )
    ).rows);

  const RECORD = "mutation($i: HubRecordDepositInput!) { hubRecordDeposit(input: $i) { created deposit { id amount currencyKey mpTransferId userId casinoId experienceId } } }";
  w.casino.fund("alice", "BTC", 500);
  const mp = w.casino.deposit("alice", "BTC", 500);
  const input = { casinoId: w.casinoId, mpTransferId: mp, uname: "alice", experience: "main", currencyKey: "BTC", amount: 500 };
  const first = await ok(w.server.url, w.operator, RECORD, { i: input });
  t.equal(first.hubRecordDeposit.created, true, "the first report creates the deposit");
  t.match(first.hubRecordDeposit.deposit, { amount: 500, currencyKey: "BTC", mpTransferId: mp, userId: alice.userId, casinoId: w.casinoId, experienceId: alice.experienceId });
  await waitFor("the put alert", 30_000, async () => (await readAlerts()).length === 1);
  t.same(alerts[0], { userId: alice.userId, casinoId: w.casinoId, experienceId: alice.experienceId, currencyKey: "BTC", mpTransferId: mp }, "the put alert carries the deposit's ids");

  const again = await ok(w.server.url, w.operator, RECORD, { i: input });
  t.equal(again.hubRecordDeposit.created, false, "a repeat creates nothing");
  t.equal(again.hubRecordDeposit.deposit.id, first.hubRecordDeposit.deposit.id, "and returns the same deposit");
  t.equal(await balanceOf(w, alice.headers), 500, "credited once");

  for (const [field, value] of [["amount", 501], ["uname", "bob"], ["currencyKey", "HOUSE"]] as const) {
    const r = await gql(w.server.url, RECORD, { i: { ...input, [field]: value } }, w.operator);
    const code = r.body.errors?.[0]?.extensions?.code;
    t.ok(code === "TRANSFER_MISMATCH" || (field === "currencyKey" && code === "TRANSFER_INVALID"), `same id, another ${field}: refused (${code}: ${r.body.errors?.[0]?.message})`);
  }
  // HOUSE is not this casino's currency; add it so the currency mismatch itself is what is refused.
  await ok(w.server.url, w.operator, "mutation { hubAddCurrency(input: { casinoId: \"" + w.casinoId + "\", key: \"ETH\", displayUnitName: \"wei\", displayUnitScale: 1 }) { key } }");
  const currency = await gql(w.server.url, RECORD, { i: { ...input, currencyKey: "ETH" } }, w.operator);
  t.equal(currency.body.errors?.[0]?.extensions?.code, "TRANSFER_MISMATCH", "same id, another currency: TRANSFER_MISMATCH");
  t.match(currency.body.errors?.[0]?.message, new RegExp(`reported transfer "${mp}" again with different details \\(currency`));
  t.equal(await balanceOf(w, alice.headers), 500, "nothing more was credited");
  // Sequenced or not: an alert is committed with its change, so one of these requests' would be there already.
  const { rows: putAlerts } = await w.server.dbPool.query<{ n: number }>("select count(*)::int as n from hub_hidden.live_alert where channel = 'put'");
  t.equal(putAlerts[0]!.n, 1, "repeats and refusals log no alert");

  const asPlayer = await gql(w.server.url, RECORD, { i: { ...input, mpTransferId: "mp-2" } }, alice.headers);
  t.equal(asPlayer.body.errors?.[0]?.extensions?.code, "FORBIDDEN", "a player cannot record deposits");
  const half = await gql(w.server.url, RECORD, { i: { ...input, mpTransferId: "mp-3", amount: 0.5 } }, w.operator);
  t.equal(half.body.errors?.[0]?.extensions?.code, "INVALID_AMOUNT", "a fraction of a base unit is refused");
  await settled(t, w);
});

t.test("pull: deposits made at the casino are fetched, credited once even when delivered twice, and acknowledged", async (t) => {
  const w = await world(t);
  const alice = await player(w, "alice");
  w.casino.fund("alice", "BTC", 10_000);
  w.casino.duplicateIncoming = true;
  const ids = [w.casino.deposit("alice", "BTC", 300), w.casino.deposit("alice", "BTC", 200)];
  w.casino.failNext("incoming", { kind: "error500" });
  w.casino.failNext("ack", { kind: "reset" });
  await waitFor("both acknowledged", 10_000, async () => w.casino.incoming.every((x) => x.acked));
  t.equal(await balanceOf(w, alice.headers), 500, "each transfer credited once");
  const { allHubDeposits } = await ok(w.server.url, alice.headers, "{ allHubDeposits { nodes { mpTransferId amount } } }");
  t.same(allHubDeposits.nodes.map((d: { mpTransferId: string }) => d.mpTransferId).sort(), ids.sort(), "the player sees their deposits");
  t.equal(w.casino.balance("alice", "BTC"), 9500, "the casino debited the player");
  await settled(t, w);
});

t.test("pull: an incoming transfer reusing an id with another amount is not credited, is logged, and stays visible as FAILED", async (t) => {
  const w = await world(t);
  await player(w, "alice");
  w.casino.fund("alice", "BTC", 1000);
  const id = w.casino.deposit("alice", "BTC", 100);
  await waitFor("credited", 10_000, async () => w.casino.incoming[0]!.acked);
  // The casino's bug: the same id again, bigger.
  w.casino.incoming.push({ ...w.casino.incoming[0]!, seq: 99, amount: 900, acked: false });
  const jobs = await waitFor("the refusal is visible", 10_000, async () => {
    const { allHubTransferJobs } = await ok(w.server.url, w.operator, "{ allHubTransferJobs(condition: { status: \"FAILED\" }) { nodes { kind mpTransferId lastError } } }");
    return allHubTransferJobs.nodes.length ? allHubTransferJobs.nodes : undefined;
  });
  t.match(jobs[0], { kind: "INCOMING", mpTransferId: id, lastError: /TRANSFER_MISMATCH/ });
  const { rows } = await w.server.dbPool.query("select sum(amount)::float8 as s from hub.deposit");
  t.equal(rows[0].s, 100, "only the first report was credited");
});

// ---------------------------------------------------------------- withdrawals

t.test("withdraw: debit, send, complete; refusals for short balances and fractions", async (t) => {
  const w = await world(t, { poll: false });
  const alice = await player(w, "alice");
  await pushDeposit(w, "alice", 1000);

  const { hubWithdraw } = await ok(w.server.url, alice.headers, WITHDRAW, { a: 400 });
  t.match(hubWithdraw.withdrawalRequest, { amount: 400, currencyKey: "BTC", userId: alice.userId });
  t.ok(["PENDING", "COMPLETED"].includes(hubWithdraw.withdrawal.status), `the withdrawal is recorded at once (${hubWithdraw.withdrawal.status})`);
  t.equal(await balanceOf(w, alice.headers), 600, "debited at once");
  const done = await waitFor("completed", 10_000, async () => {
    const s = await withdrawalStatus(w, hubWithdraw.withdrawalRequest.id);
    return s.status === "COMPLETED" ? s : undefined;
  });
  t.match(done.mpTransferId, /^out-/, "the casino's transfer id is recorded");
  t.equal(w.casino.balance("alice", "BTC"), 400, "the casino credited the player");

  const short = await gql(w.server.url, WITHDRAW, { a: 601 }, alice.headers);
  t.equal(short.body.errors?.[0]?.extensions?.code, "INSUFFICIENT_FUNDS", `more than the balance: ${short.body.errors?.[0]?.message}`);
  const half = await gql(w.server.url, WITHDRAW, { a: 0.5 }, alice.headers);
  t.equal(half.body.errors?.[0]?.extensions?.code, "INVALID_AMOUNT", `below the smallest unit: ${half.body.errors?.[0]?.message}`);
  const anon = await gql(w.server.url, WITHDRAW, { a: 1 });
  t.equal(anon.body.errors?.[0]?.extensions?.code, "UNAUTHENTICATED");
  const pgUser = await createPlayer(w.server.dbPool, { casinoId: w.server.playgroundCasinoId, uname: "nowhere" });
  const pgExperience = await createExperience(w.server.dbPool, { casinoId: w.server.playgroundCasinoId });
  const { token } = await w.server.authenticate(pgUser.id, pgExperience.id);
  const nowhere = await gql(w.server.url, WITHDRAW, { a: 1 }, { authorization: `session:${token}` });
  t.equal(nowhere.body.errors?.[0]?.extensions?.code, "TRANSFERS_NOT_CONFIGURED", `a casino without a transfer endpoint: ${nowhere.body.errors?.[0]?.message}`);
  t.equal(await balanceOf(w, alice.headers), 600, "refusals move nothing");
  await settled(t, w);
});

t.test("every fault of the casino: each withdrawal is applied exactly once, or refunded when refused", async (t) => {
  const w = await world(t, { poll: false });
  const alice = await player(w, "alice");
  await pushDeposit(w, "alice", 100_000);

  const cases = [
    { name: "delay past the timeout (applied, answered late)", fault: { kind: "delay", ms: 2500 }, expect: "COMPLETED" },
    { name: "500", fault: { kind: "error500" }, times: 3, expect: "COMPLETED" },
    { name: "connection reset", fault: { kind: "reset" }, times: 2, expect: "COMPLETED" },
    { name: "applied, then the connection fails", fault: { kind: "applyThenReset" }, times: 2, expect: "COMPLETED" },
    { name: "definitive refusal", fault: { kind: "refuse", reason: "account frozen" }, expect: "CANCELED" },
  ] as const;
  let expected = 100_000;
  for (const c of cases) {
    w.casino.clearFaults(); // a retry that found its answer by lookup leaves its case's later faults unused
    w.casino.failNext("outgoing", c.fault as never, "times" in c ? c.times : 1);
    const before = w.casino.hits.outgoing;
    const { hubWithdraw } = await ok(w.server.url, alice.headers, WITHDRAW, { a: 100 });
    const id = hubWithdraw.withdrawalRequest.id as string;
    const s = await waitFor(c.name, 15_000, async () => {
      const s = await withdrawalStatus(w, id);
      return s.status !== "PENDING" ? s : undefined;
    });
    t.equal(s.status, c.expect, `${c.name}: ${c.expect} after ${w.casino.hits.outgoing - before} sends`);
    const atCasino = w.casino.outgoing.get(id);
    t.equal(atCasino?.status, c.expect === "COMPLETED" ? "COMPLETED" : "REFUSED", `${c.name}: the casino recorded the key once`);
    if (c.expect === "COMPLETED") expected -= 100;
    t.equal(await balanceOf(w, alice.headers), expected, `${c.name}: balance ${expected}`);
  }
  const { allHubTransferJobs } = await ok(w.server.url, w.operator, "{ allHubTransferJobs(condition: { kind: \"WITHDRAWAL\" }) { nodes { status attempts lastError nextAttemptAt } } }");
  t.ok(allHubTransferJobs.nodes.some((j: { attempts: number }) => j.attempts > 1), "operators see the attempts of each item");
  t.equal(w.casino.balance("alice", "BTC"), 400, "the casino paid four withdrawals of 100, once each");
  await settled(t, w);
});

t.test("the casino goes away: withdrawals stay pending and visible, complete when it is back; hubRetryWithdrawal and hubRefundWithdrawal", async (t) => {
  const w = await world(t, { poll: false });
  const alice = await player(w, "alice");
  await pushDeposit(w, "alice", 1000);

  // Away for a while: the withdrawal waits, visibly, then completes.
  const away = w.casino.goAway(1500);
  const { hubWithdraw } = await ok(w.server.url, alice.headers, WITHDRAW, { a: 100 });
  const first = hubWithdraw.withdrawalRequest.id as string;
  const JOB = "query($id: UUID!) { allHubTransferJobs(condition: { withdrawalRequestId: $id }) { nodes { status attempts lastError nextAttemptAt } } }";
  const seen = await waitFor("a failed attempt is visible", 30_000, async () => {
    const { allHubTransferJobs } = await ok(w.server.url, w.operator, JOB, { id: first });
    const j = allHubTransferJobs.nodes[0];
    return j.attempts >= 1 && j.lastError ? j : undefined;
  });
  t.match(seen, { status: "PENDING", lastError: /ECONNREFUSED|fetch failed/ }, `pending and visible while the casino is away: ${seen.lastError}`);
  const cli = await cliOn(w.server)(["transfers", "list", "--json"]);
  t.equal(cli.code, 0, `hub transfers list exits 0 (${cli.stderr.trim()})`);
  const listed = (JSON.parse(cli.last) as { kind: string; subject: string; status: string; attempts: number; last_error: string | null; amount: number }[]).find((r) => r.subject === first);
  t.match(listed, { kind: "WITHDRAWAL", amount: 100 }, "hub transfers list shows the withdrawal's item");
  t.ok(listed && (listed.status === "DONE" || (listed.attempts >= 1 && listed.last_error)), `with its attempts and last error (${JSON.stringify(listed)})`);
  const table = await cliOn(w.server)(["transfers", "list"]);
  t.match(table.stdout, /id\s+kind\s+status\s+casino\s+subject\s+amount\s+attempts\s+next_attempt_at\s+last_error/, "and prints a table without --json");
  const playerView = await ok(w.server.url, alice.headers, "{ allHubTransferJobs { totalCount } }");
  t.equal(playerView.allHubTransferJobs.totalCount, 0, "players do not see the worker's items");
  await away;
  await waitFor("completed after the casino came back", 10_000, async () => (await withdrawalStatus(w, first)).status === "COMPLETED");

  // Failing for good (500 on every send): retry now, then refund once the casino says it never applied it.
  w.casino.failNext("outgoing", { kind: "error500" }, 1000);
  const second = (await ok(w.server.url, alice.headers, WITHDRAW, { a: 250 })).hubWithdraw.withdrawalRequest.id as string;
  await waitFor("two attempts", 30_000, async () => w.casino.hits.outgoing >= 3);
  const RETRY = "mutation($id: UUID!) { hubRetryWithdrawal(input: { withdrawalRequestId: $id }) { transferJob { status attempts nextAttemptAt } } }";
  const REFUND = "mutation($id: UUID!) { hubRefundWithdrawal(input: { withdrawalRequestId: $id }) { withdrawal { status } } }";
  const retried = await waitFor("retry accepted", 30_000, async () => {
    const r = await gql(w.server.url, RETRY, { id: second }, w.operator);
    return r.body.data?.hubRetryWithdrawal ?? (r.body.errors?.[0]?.extensions?.code === "TRANSFER_IN_PROGRESS" ? undefined : Promise.reject(new Error(JSON.stringify(r.body))));
  });
  t.equal(retried.transferJob.status, "PENDING", "hubRetryWithdrawal makes the item due now");
  t.ok(Date.parse(retried.transferJob.nextAttemptAt) <= Date.now() + 1000, "its next attempt time is now");
  const asPlayer = await gql(w.server.url, REFUND, { id: second }, alice.headers);
  t.equal(asPlayer.body.errors?.[0]?.extensions?.code, "FORBIDDEN", "players cannot refund");
  const codes: string[] = [];
  const refunded = await waitFor("refunded", 30_000, async () => {
    const r = await gql(w.server.url, REFUND, { id: second }, w.operator);
    const code = r.body.errors?.[0]?.extensions?.code as string | undefined;
    if (code) codes.push(code);
    return r.body.data?.hubRefundWithdrawal ?? (code === "TRANSFER_IN_PROGRESS" || code === "TRANSFER_REFUND_UNSAFE" ? undefined : Promise.reject(new Error(JSON.stringify(r.body))));
  });
  t.ok(codes.includes("TRANSFER_REFUND_UNSAFE"), `while a send may still arrive the refund is refused, and sending paused (${codes.join(", ")})`);
  t.equal(refunded.withdrawal.status, "CANCELED", "refunded: the casino never applied it");
  t.equal(await balanceOf(w, alice.headers), 900, "the 250 are back in the balance");
  const twice = await gql(w.server.url, REFUND, { id: second }, w.operator);
  t.equal(twice.body.errors?.[0]?.extensions?.code, "TRANSFER_NOT_PENDING", "a second refund is refused");

  // Applied at the casino but never confirmed: the refund is refused and the completion recorded.
  w.casino.clearFaults();
  w.casino.failNext("outgoing", { kind: "applyThenReset" }, 1000);
  const third = (await ok(w.server.url, alice.headers, WITHDRAW, { a: 50 })).hubWithdraw.withdrawalRequest.id as string;
  await waitFor("applied at the casino", 30_000, async () => w.casino.outgoing.has(third));
  // Either the refund's lookup finds it applied, or the worker's own lookup on its next attempt does first.
  const unsafe = await waitFor("refund answered", 30_000, async () => {
    const r = await gql(w.server.url, REFUND, { id: third }, w.operator);
    const e = r.body.errors?.[0];
    return (e?.extensions?.code === "TRANSFER_REFUND_UNSAFE" && /applied it/.test(e.message)) || e?.extensions?.code === "TRANSFER_NOT_PENDING" ? e : undefined;
  });
  t.ok(unsafe, `refund of an applied transfer refused: ${unsafe.extensions?.code}: ${unsafe.message}`);
  t.equal((await withdrawalStatus(w, third)).status, "COMPLETED", "and it is recorded as COMPLETED");
  t.equal(await balanceOf(w, alice.headers), 850, "nothing was given back");
  const unknown = await gql(w.server.url, REFUND, { id: "00000000-0000-7000-8000-000000000000" }, w.operator);
  t.equal(unknown.body.errors?.[0]?.extensions?.code, "TRANSFER_NOT_FOUND");
  await settled(t, w);
});

t.test("row-level security: a player sees their own transfers, an operator all", async (t) => {
  const w = await world(t, { poll: false });
  const alice = await player(w, "alice");
  const bob = await player(w, "bob");
  await pushDeposit(w, "alice", 100);
  await pushDeposit(w, "bob", 100);
  await ok(w.server.url, alice.headers, WITHDRAW, { a: 10 });
  await ok(w.server.url, bob.headers, WITHDRAW, { a: 20 });
  const Q = "{ allHubDeposits { nodes { userId } } allHubWithdrawalRequests { nodes { userId } } allHubWithdrawals { nodes { userId } } }";
  for (const who of [alice, bob]) {
    const data = await ok(w.server.url, who.headers, Q);
    for (const key of ["allHubDeposits", "allHubWithdrawalRequests", "allHubWithdrawals"]) {
      t.same(data[key].nodes.map((n: { userId: string }) => n.userId), [who.userId], `${key}: only the player's own`);
    }
  }
  const all = await ok(w.server.url, w.operator, Q);
  t.equal(all.allHubDeposits.nodes.length, 2, "the operator sees every deposit");
  t.equal(all.allHubWithdrawals.nodes.length, 2, "and every withdrawal");
  const anon = await ok(w.server.url, {}, Q);
  t.equal(anon.allHubDeposits.nodes.length, 0, "anonymous: nothing");
});

t.test("a connector of your own, chosen per casino: withdrawals go out through it, deposits come in from it", async (t) => {
  // A casino whose API is not the reference protocol: its own in-process ledger behind the CasinoConnector interface.
  const ledger = { incoming: [{ id: "own-1", uname: "carol", experience: "main", currencyKey: "BTC", amount: 70 }], acked: new Set<string>(), paid: new Map<string, number>(), settings: [] as ConnectorSettings[] };
  const own = (settings: ConnectorSettings): CasinoConnector => {
    ledger.settings.push(settings);
    return {
      async fetchIncoming(cursor) {
        const from = cursor === null ? 0 : Number(cursor);
        return { transfers: ledger.incoming.slice(from), cursor: String(ledger.incoming.length), more: false };
      },
      async acknowledge(id) {
        ledger.acked.add(id);
      },
      async send(transfer) {
        if (!ledger.paid.has(transfer.idempotencyKey)) ledger.paid.set(transfer.idempotencyKey, transfer.amount);
        return { status: "COMPLETED", mpTransferId: `own-out-${transfer.idempotencyKey.slice(-6)}` };
      },
      async lookup(key) {
        return ledger.paid.has(key) ? { status: "COMPLETED", mpTransferId: `own-out-${key.slice(-6)}` } : { status: "NOT_FOUND" };
      },
    };
  };
  const server = await startTestServer({ transfers: { ...FAST_TRANSFERS, connectors: { own } } });
  t.teardown(() => server.stop());
  const { apiKey } = await server.authenticateOperator();
  const operator = { authorization: `apikey:${apiKey}` };
  const { hubAddCasino } = await ok(server.url, operator, "mutation { hubAddCasino(input: { name: \"own\", apiKey: \"own-key\" }) { casinoId } }");
  const casinoId = hubAddCasino.casinoId as string;
  await ok(server.url, operator, `mutation { hubAddCurrency(input: { casinoId: "${casinoId}", key: "BTC", displayUnitName: "bits", displayUnitScale: 100 }) { key } }`);
  const unknown = await gql(server.url, `mutation { hubSetCasinoTransfers(input: { casinoId: "${casinoId}", connector: "nope" }) { casinoId } }`, {}, operator);
  t.equal(unknown.body.errors?.[0]?.extensions?.code, "BAD_USER_INPUT", `an unknown connector kind is refused: ${unknown.body.errors?.[0]?.message}`);
  await ok(server.url, operator, `mutation { hubSetCasinoTransfers(input: { casinoId: "${casinoId}", connector: "own" }) { casinoId } }`);
  await waitFor("the deposit acknowledged", 10_000, async () => ledger.acked.has("own-1"));
  t.match(ledger.settings[0], { casinoId, apiKey: "own-key", url: null }, "the factory gets the casino's id and API key");
  const { rows } = await server.dbPool.query<{ id: string; experience_id: string }>("select u.id, d.experience_id from hub.deposit d join hub.user u on u.id = d.user_id where d.mp_transfer_id = 'own-1'");
  const { token } = await server.authenticate(rows[0]!.id, rows[0]!.experience_id);
  const carol = { authorization: `session:${token}` };
  const { hubWithdraw } = await ok(server.url, carol, WITHDRAW, { a: 30 });
  await waitFor("paid through the connector", 10_000, async () => {
    const { rows } = await server.dbPool.query("select status, mp_transfer_id from hub.withdrawal where withdrawal_request_id = $1", [hubWithdraw.withdrawalRequest.id]);
    return rows[0].status === "COMPLETED";
  });
  t.equal(ledger.paid.get(hubWithdraw.withdrawalRequest.id), 30, "the casino's own ledger paid 30 under the request id");
  const data = await ok(server.url, carol, BALANCE, { c: "BTC" });
  t.equal(data.hubCurrentUser.hubBalanceByCurrency.amount, 40, "70 in, 30 out");
});
