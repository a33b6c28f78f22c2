/**
 * Take requests against the simulated casino (a real HTTP server with its own
 * ledger): the casino asks for a player's funds back, the hub reserves them
 * through the ledger and has the casino apply the transfer, once; refusals,
 * the casino's faults and give-ups return the reserve once; players see their
 * own rows, operators every row. Every test ends with the books reconciled.
 */
import "./helpers/env.js";
import t, { type Test } from "tap";
import { createPlayer, startTestServer, type TestServer } from "@hubpkg/hub/test";
import { createHttpConnector, type ConnectorFactory } from "@hubpkg/hub";
import { gql } from "./helpers/http.js";
import { startSimCasino, type SimCasino } from "./helpers/sim-casino.js";
import { addSimCasino, FAST_TRANSFERS, ok, reconcile, sleep, waitFor } from "./helpers/transfers.js";
// Internal: the two checks that order a send with a give-up.
import { beforeTakeSend, sendWindowClosed } from "../dist/src/transfers/take-requests.js";

interface World {
  server: TestServer;
  casino: SimCasino;
  casinoId: string;
  operator: Record<string, string>;
}

async function world(t: Test, opts: { takeRequests?: boolean; takeRequestTimeoutMs?: number; connectors?: Record<string, ConnectorFactory> } = {}): Promise<World> {
  const casino = await startSimCasino();
  t.teardown(() => casino.close());
  const server = await startTestServer({
    transfers: { ...FAST_TRANSFERS, ...(opts.takeRequestTimeoutMs ? { takeRequestTimeoutMs: opts.takeRequestTimeoutMs } : {}), ...(opts.connectors ? { connectors: opts.connectors } : {}) },
  });
  t.teardown(() => server.stop());
  const { apiKey } = await server.authenticateOperator();
  const operator = { authorization: `apikey:${apiKey}` };
  const casinoId = await addSimCasino(server.url, operator, casino, { poll: false, takeRequests: opts.takeRequests ?? false });
  return { server, casino, casinoId, operator };
}

/** A player with `funds` deposited into the experience "main" (pushed, as a casino backend does) and a session there. */
async function player(w: World, uname: string, funds: number) {
  const user = await createPlayer(w.server.dbPool, { casinoId: w.casinoId, uname });
  const { rows } = await w.server.dbPool.query<{ id: string }>(
    "insert into hub.experience (casino_id, name) values ($1, 'main') on conflict (casino_id, name) do update set name = excluded.name returning id",
    [w.casinoId],
  );
  if (funds > 0) {
    w.casino.fund(uname, "BTC", funds);
    const id = w.casino.deposit(uname, "BTC", funds);
    await ok(w.server.url, w.operator, "mutation($i: HubRecordDepositInput!) { hubRecordDeposit(input: $i) { created } }", {
      i: { casinoId: w.casinoId, mpTransferId: id, uname, experience: "main", currencyKey: "BTC", amount: funds },
    });
  }
  const { token } = await w.server.authenticate(user.id, rows[0]!.id);
  return { userId: user.id, experienceId: rows[0]!.id, headers: { authorization: `session:${token}` } };
}

const FIELDS = `id mpTakeRequestId amount reservedAmount status mpStatus mpTransferId mpTransferStatus transferNeedsCompletion
  completionAttemptCount transferCompletionAttemptedAt insufficientBalanceError refundedAt debug statusChangedAt updatedAt
  userId casinoId experienceId currencyKey hubUserByUserId { uname }`;
const BY_MP_ID = `query($id: UUID!) { hubTakeRequestByMpTakeRequestId(mpTakeRequestId: $id) { ${FIELDS} } }`;
const RECORD = `mutation($i: HubRecordTakeRequestInput!) { hubRecordTakeRequest(input: $i) { created takeRequest { ${FIELDS} } } }`;

async function takeOf(w: World, mpId: string, headers = w.operator) {
  const data = await ok(w.server.url, headers, BY_MP_ID, { id: mpId });
  return data.hubTakeRequestByMpTakeRequestId;
}

async function waitForTake(w: World, mpId: string, what: string, done: (row: any) => boolean) {
  return waitFor(`take request ${what}`, 15_000, async () => {
    const row = await takeOf(w, mpId);
    return row && done(row) ? row : undefined;
  });
}

async function balanceOf(w: World, headers: Record<string, string>): Promise<number> {
  const data = await ok(w.server.url, headers, "{ hubCurrentUser { hubBalanceByCurrency(currency: \"BTC\") { amount } } }");
  return data.hubCurrentUser.hubBalanceByCurrency?.amount ?? 0;
}

/** The ledger's entries about one take request: its reserve and its refund. */
async function ledgerOf(w: World, mpId: string) {
  const { rows } = await w.server.dbPool.query<{ amount_delta: number; reason: string }>(
    "select amount_delta, reason from hub.ledger where reason like '%take request ' || $1 || '%' order by id",
    [mpId],
  );
  return rows;
}

async function settled(t: Test, w: World) {
  const result = await waitFor("every transfer settled", 15_000, async () => {
    const r = await reconcile(w.server.superuserDatabaseUrl, w.casinoId, w.casino);
    return r.pending === 0 && r.problems.length === 0 ? r : undefined;
  }).catch(async (error: Error) => {
    t.comment(JSON.stringify(await reconcile(w.server.superuserDatabaseUrl, w.casinoId, w.casino)));
    throw error;
  });
  t.same(result.problems, [], "the casino's ledger and the hub's agree, every balance equals its ledger sum");
  t.equal(result.pending, 0, "nothing is left pending");
}

t.test("happy path: the casino's take request is fetched, reserved through the ledger, transferred once and completed", async (t) => {
  const w = await world(t, { takeRequests: true });
  const alice = await player(w, "alice", 1000);
  const mpId = w.casino.requestTake("alice", "BTC", 300);
  const row = await waitForTake(w, mpId, "completed", (r) => r.status === "COMPLETED");
  const sim = w.casino.takes.find((x) => x.id === mpId)!;
  t.match(row, {
    mpTakeRequestId: mpId, amount: 300, reservedAmount: 300, status: "COMPLETED", mpStatus: "TRANSFERRED",
    mpTransferId: sim.outcome?.status === "COMPLETED" ? sim.outcome.id : "?", mpTransferStatus: "COMPLETED",
    transferNeedsCompletion: false, completionAttemptCount: 1, insufficientBalanceError: null, refundedAt: null,
    userId: alice.userId, casinoId: w.casinoId, experienceId: alice.experienceId, currencyKey: "BTC", hubUserByUserId: { uname: "alice" },
  });
  t.ok(row.transferCompletionAttemptedAt, "the attempt's time is recorded");
  t.equal(sim.status, "TRANSFERRED", "the casino's take request is transferred");
  t.equal(await balanceOf(w, alice.headers), 700, "the reserve left the balance");
  t.equal(w.casino.balance("alice", "BTC"), 300, "the casino credited the player");
  t.same(await ledgerOf(w, mpId), [{ amount_delta: -300, reason: `take request ${mpId}` }], "one ledger entry: the reserve");

  // null: the whole balance.
  const all = w.casino.requestTake("alice", "BTC", null);
  const whole = await waitForTake(w, all, "completed", (r) => r.status === "COMPLETED");
  t.match(whole, { amount: null, reservedAmount: 700, status: "COMPLETED" }, "a take request without an amount takes the whole balance");
  t.equal(await balanceOf(w, alice.headers), 0);
  t.equal(w.casino.balance("alice", "BTC"), 1000, "everything is back at the casino");

  const mine = await ok(w.server.url, alice.headers, "{ hubCurrentUser { hubTakeRequestsByUserId(orderBy: ID_ASC) { totalCount nodes { mpTakeRequestId status } } } }");
  t.same(mine.hubCurrentUser.hubTakeRequestsByUserId.nodes, [{ mpTakeRequestId: mpId, status: "COMPLETED" }, { mpTakeRequestId: all, status: "COMPLETED" }], "the player reads their own take requests");
  await settled(t, w);
});

t.test("idempotent: the same take request delivered twice (push, and a duplicating poll) reserves once; a changed repeat is refused", async (t) => {
  const w = await world(t);
  const alice = await player(w, "alice", 1000);
  const mpId = w.casino.requestTake("alice", "BTC", 400);
  const input = { casinoId: w.casinoId, mpTakeRequestId: mpId, uname: "alice", experience: "main", currencyKey: "BTC", amount: 400 };
  const [a, b] = await Promise.all([ok(w.server.url, w.operator, RECORD, { i: input }), ok(w.server.url, w.operator, RECORD, { i: input })]);
  t.same([a.hubRecordTakeRequest.created, b.hubRecordTakeRequest.created].sort(), [false, true], "two concurrent deliveries: one creates");
  t.equal(a.hubRecordTakeRequest.takeRequest.id, b.hubRecordTakeRequest.takeRequest.id, "both answer the same row");
  const again = await ok(w.server.url, w.operator, RECORD, { i: input });
  t.equal(again.hubRecordTakeRequest.created, false, "a later repeat creates nothing");
  await waitForTake(w, mpId, "completed", (r) => r.status === "COMPLETED");
  t.same(await ledgerOf(w, mpId), [{ amount_delta: -400, reason: `take request ${mpId}` }], "one reservation in the ledger");
  t.equal(w.casino.balance("alice", "BTC"), 400, "the casino applied the transfer once");

  for (const [field, value] of [["amount", 401], ["uname", "bob"], ["amount", null]] as const) {
    const r = await gql(w.server.url, RECORD, { i: { ...input, [field]: value } }, w.operator);
    t.equal(r.body.errors?.[0]?.extensions?.code, "TAKE_REQUEST_MISMATCH", `same id, another ${field}: ${r.body.errors?.[0]?.message}`);
  }
  const bad = await gql(w.server.url, RECORD, { i: { ...input, mpTakeRequestId: "00000000-0000-0000-0000-00000000000a", currencyKey: "NOPE" } }, w.operator);
  t.equal(bad.body.errors?.[0]?.extensions?.code, "TAKE_REQUEST_INVALID", `an unknown currency: ${bad.body.errors?.[0]?.message}`);
  const half = await gql(w.server.url, RECORD, { i: { ...input, mpTakeRequestId: "00000000-0000-0000-0000-00000000000b", amount: 0.5 } }, w.operator);
  t.equal(half.body.errors?.[0]?.extensions?.code, "INVALID_AMOUNT");
  const asPlayer = await gql(w.server.url, RECORD, { i: { ...input, mpTakeRequestId: "00000000-0000-0000-0000-00000000000c" } }, alice.headers);
  t.equal(asPlayer.body.errors?.[0]?.extensions?.code, "FORBIDDEN", "a player cannot record take requests");
  const nowhere = await gql(w.server.url, RECORD, { i: { ...input, casinoId: w.server.playgroundCasinoId, mpTakeRequestId: "00000000-0000-0000-0000-00000000000d" } }, w.operator);
  t.equal(nowhere.body.errors?.[0]?.extensions?.code, "TRANSFERS_NOT_CONFIGURED", `a casino the hub cannot transfer to: ${nowhere.body.errors?.[0]?.message}`);
  const unknown = await gql(w.server.url, RECORD, { i: { ...input, casinoId: "00000000-0000-0000-0000-00000000000e", mpTakeRequestId: "00000000-0000-0000-0000-00000000000e" } }, w.operator);
  t.equal(unknown.body.errors?.[0]?.extensions?.code, "UNKNOWN_CASINO");

  // The poll delivers every take request twice on each page: still one reservation each.
  w.casino.duplicateIncoming = true;
  const polled = w.casino.requestTake("alice", "BTC", 100);
  await ok(w.server.url, w.operator, "mutation($i: HubSetCasinoTransfersInput!) { hubSetCasinoTransfers(input: $i) { casinoId } }", { i: { casinoId: w.casinoId, poll: false, takeRequests: true } });
  await waitForTake(w, polled, "completed", (r) => r.status === "COMPLETED");
  t.same(await ledgerOf(w, polled), [{ amount_delta: -100, reason: `take request ${polled}` }], "polled twice, reserved once");
  const { rows } = await w.server.dbPool.query("select count(*)::int as n from hub.take_request where mp_take_request_id = $1", [mpId]);
  t.equal(rows[0].n, 1, "the first take request, also on the casino's list, was not received again");
  t.equal(await balanceOf(w, alice.headers), 500);
  await settled(t, w);
});

t.test("insufficient funds: refused and recorded, nothing taken, the casino told", async (t) => {
  const w = await world(t, { takeRequests: true });
  const alice = await player(w, "alice", 100);
  const mpId = w.casino.requestTake("alice", "BTC", 500);
  const row = await waitForTake(w, mpId, "rejected at the casino", (r) => r.mpStatus === "CONTROLLER_REJECTED");
  t.match(row, { status: "REJECTED", insufficientBalanceError: true, reservedAmount: 0, amount: 500, refundedAt: null, mpTransferId: null, transferNeedsCompletion: false });
  t.match(row.debug, /^TAKE_REQUEST_INSUFFICIENT_FUNDS: the balance is 100 BTC/, "the reason, by code");
  const sim = w.casino.takes.find((x) => x.id === mpId)!;
  t.equal(sim.status, "CONTROLLER_REJECTED", "the casino recorded the rejection");
  t.match(sim.rejectReason, /TAKE_REQUEST_INSUFFICIENT_FUNDS/);
  t.equal(w.casino.hits.takeTransfer, 0, "no transfer was asked for");
  t.same(await ledgerOf(w, mpId), [], "nothing in the ledger");
  t.equal(await balanceOf(w, alice.headers), 100, "the balance is untouched");

  // An empty balance and a take-everything request: refused the same way.
  const bob = await player(w, "bob", 0);
  const all = w.casino.requestTake("bob", "BTC", null);
  const empty = await waitForTake(w, all, "rejected at the casino", (r) => r.mpStatus === "CONTROLLER_REJECTED");
  t.match(empty, { status: "REJECTED", insufficientBalanceError: true, reservedAmount: 0, amount: null });
  t.equal(await balanceOf(w, bob.headers), 0);
  await settled(t, w);
});

t.test("the casino refuses the transfer (the player canceled): the reserve comes back once", async (t) => {
  const w = await world(t);
  const alice = await player(w, "alice", 1000);
  const mpId = w.casino.requestTake("alice", "BTC", 600);
  w.casino.cancelTake(mpId);
  const { hubRecordTakeRequest } = await ok(w.server.url, w.operator, RECORD, { i: { casinoId: w.casinoId, mpTakeRequestId: mpId, uname: "alice", experience: "main", currencyKey: "BTC", amount: 600 } });
  t.match(hubRecordTakeRequest.takeRequest, { reservedAmount: 600 }, "reserved on receipt");
  t.ok(["PROCESSING", "FAILED"].includes(hubRecordTakeRequest.takeRequest.status), `then transferred by the worker (${hubRecordTakeRequest.takeRequest.status})`);
  const row = await waitForTake(w, mpId, "failed", (r) => r.status === "FAILED");
  t.match(row, { status: "FAILED", mpStatus: "USER_CANCELED", mpTransferStatus: "CANCELED", mpTransferId: null, reservedAmount: 600, transferNeedsCompletion: false });
  t.ok(row.refundedAt, "refundedAt is set");
  t.match(row.debug, /the casino refused the transfer: the player canceled/);
  await sleep(300);
  t.same(
    (await ledgerOf(w, mpId)).map((e) => e.amount_delta),
    [-600, 600],
    "the ledger holds the reserve and one refund",
  );
  t.equal(await balanceOf(w, alice.headers), 1000, "the balance is whole again");
  t.equal(w.casino.balance("alice", "BTC"), 0, "the casino credited nothing");
  await settled(t, w);
});

t.test("the casino keeps failing: the hub gives up, returns the reserve exactly once and rejects; a transfer the casino applied silently is completed, not refunded", async (t) => {
  const w = await world(t, { takeRequestTimeoutMs: 2000 });
  const alice = await player(w, "alice", 1000);
  const send = (mpId: string, amount: number) =>
    ok(w.server.url, w.operator, RECORD, { i: { casinoId: w.casinoId, mpTakeRequestId: mpId, uname: "alice", experience: "main", currencyKey: "BTC", amount } });

  // Every transfer attempt answers 500 until the hub gives up.
  w.casino.failNext("takeTransfer", { kind: "error500" }, 10_000);
  const failing = w.casino.requestTake("alice", "BTC", 300);
  await send(failing, 300);
  t.equal(await balanceOf(w, alice.headers), 700, "reserved at once");
  const row = await waitForTake(w, failing, "given up and rejected at the casino", (r) => r.mpStatus === "CONTROLLER_REJECTED");
  t.match(row, { status: "REJECTED", mpTransferStatus: "EXPIRED", reservedAmount: 300, transferNeedsCompletion: false, insufficientBalanceError: null });
  t.ok(row.refundedAt, "refundedAt is set");
  t.match(row.debug, /^TAKE_REQUEST_EXPIRED:/);
  t.ok(row.completionAttemptCount >= 1, `${row.completionAttemptCount} attempts counted`);
  t.equal(w.casino.takes.find((x) => x.id === failing)!.status, "CONTROLLER_REJECTED", "the casino was told");
  await sleep(500);
  t.same((await ledgerOf(w, failing)).map((e) => e.amount_delta), [-300, 300], "one reserve, one refund, however many rounds the worker made");
  t.equal(await balanceOf(w, alice.headers), 1000, "the balance is whole again");
  w.casino.clearFaults();

  // The casino applies the transfer but the answer is lost, again and again: its lookup says so, and the hub records it.
  w.casino.failNext("takeTransfer", { kind: "applyThenReset" }, 10_000);
  w.casino.failNext("takeLookup", { kind: "error500" }, 2);
  const silent = w.casino.requestTake("alice", "BTC", 200);
  await send(silent, 200);
  const done = await waitForTake(w, silent, "completed", (r) => r.status === "COMPLETED");
  t.match(done, { status: "COMPLETED", mpStatus: "TRANSFERRED", refundedAt: null, reservedAmount: 200 });
  t.same((await ledgerOf(w, silent)).map((e) => e.amount_delta), [-200], "applied by the casino: never refunded");
  t.equal(w.casino.balance("alice", "BTC"), 200);
  w.casino.clearFaults();
  await settled(t, w);
});

t.test("visibility: the player sees their own take requests only; the operator sees every one", async (t) => {
  // A connector of the project's own: without the take methods it cannot fetch take requests.
  const w = await world(t, {
    connectors: {
      "without-takes": (settings) => {
        const { fetchIncoming, acknowledge, send, lookup } = createHttpConnector(settings);
        return { fetchIncoming, acknowledge, send, lookup };
      },
    },
  });
  const SET = "mutation($i: HubSetCasinoTransfersInput!) { hubSetCasinoTransfers(input: $i) { casinoId } }";
  const refused = await gql(w.server.url, SET, { i: { casinoId: w.casinoId, connector: "without-takes", url: `${w.casino.baseUrl}/hub/transfers`, poll: false, takeRequests: true } }, w.operator);
  t.equal(refused.body.errors?.[0]?.extensions?.code, "TAKE_REQUESTS_NOT_SUPPORTED", `a connector without take requests: ${refused.body.errors?.[0]?.message}`);
  await ok(w.server.url, w.operator, SET, { i: { casinoId: w.casinoId, connector: "without-takes", url: `${w.casino.baseUrl}/hub/transfers`, poll: false } });
  await ok(w.server.url, w.operator, SET, { i: { casinoId: w.casinoId, poll: false } });
  const alice = await player(w, "alice", 1000);
  const bob = await player(w, "bob", 1000);
  const mpId = w.casino.requestTake("alice", "BTC", 100);
  const { hubRecordTakeRequest } = await ok(w.server.url, w.operator, RECORD, { i: { casinoId: w.casinoId, mpTakeRequestId: mpId, uname: "alice", experience: "main", currencyKey: "BTC", amount: 100 } });
  const id = hubRecordTakeRequest.takeRequest.id;
  await waitForTake(w, mpId, "completed", (r) => r.status === "COMPLETED");

  const Q = `query($id: UUID!, $mp: UUID!) { hubTakeRequestById(id: $id) { id } hubTakeRequestByMpTakeRequestId(mpTakeRequestId: $mp) { id } allHubTakeRequests { totalCount } }`;
  const asAlice = await ok(w.server.url, alice.headers, Q, { id, mp: mpId });
  t.same(asAlice, { hubTakeRequestById: { id }, hubTakeRequestByMpTakeRequestId: { id }, allHubTakeRequests: { totalCount: 1 } }, "alice sees hers");
  const asBob = await ok(w.server.url, bob.headers, Q, { id, mp: mpId });
  t.same(asBob, { hubTakeRequestById: null, hubTakeRequestByMpTakeRequestId: null, allHubTakeRequests: { totalCount: 0 } }, "bob sees nothing of it");
  const anonymous = await ok(w.server.url, {}, Q, { id, mp: mpId });
  t.same(anonymous, { hubTakeRequestById: null, hubTakeRequestByMpTakeRequestId: null, allHubTakeRequests: { totalCount: 0 } }, "nor does an anonymous request");
  const asOperator = await ok(
    w.server.url,
    w.operator,
    `query($id: UUID!, $c: UUID!) { hubTakeRequestById(id: $id) { status hubUserByUserId { uname } } hubCasinoById(id: $c) { hubTakeRequestsByCasinoId { totalCount } } allHubTakeRequests(condition: { status: COMPLETED }) { totalCount } }`,
    { id, c: w.casinoId },
  );
  t.same(asOperator, { hubTakeRequestById: { status: "COMPLETED", hubUserByUserId: { uname: "alice" } }, hubCasinoById: { hubTakeRequestsByCasinoId: { totalCount: 1 } }, allHubTakeRequests: { totalCount: 1 } }, "the operator sees it");
  const jobs = await ok(w.server.url, w.operator, `{ allHubTransferJobs(condition: { kind: "TAKE" }) { nodes { takeRequestId status } } }`);
  t.same(jobs.allHubTransferJobs.nodes, [{ takeRequestId: id, status: "DONE" }], "the worker's item is the operator's to see");
  const bobJobs = await ok(w.server.url, bob.headers, `{ allHubTransferJobs { totalCount } }`);
  t.equal(bobJobs.allHubTransferJobs.totalCount, 0, "players see no worker items");
  await settled(t, w);
});

t.test("a send and a give-up exclude each other: no send once given up; no refund while a recorded send may still land", async (t) => {
  // The worker is off: the test plays both sides on the take request's rows.
  const casino = await startSimCasino();
  t.teardown(() => casino.close());
  const server = await startTestServer({ transfers: { ...FAST_TRANSFERS, worker: false } });
  t.teardown(() => server.stop());
  const { apiKey } = await server.authenticateOperator();
  const w: World = { server, casino, casinoId: "", operator: { authorization: `apikey:${apiKey}` } };
  w.casinoId = await addSimCasino(server.url, w.operator, casino, { poll: false });
  await player(w, "alice", 1000);
  const mpId = casino.requestTake("alice", "BTC", 100);
  const { hubRecordTakeRequest } = await ok(server.url, w.operator, RECORD, { i: { casinoId: w.casinoId, mpTakeRequestId: mpId, uname: "alice", experience: "main", currencyKey: "BTC", amount: 100 } });
  const id = hubRecordTakeRequest.takeRequest.id as string;
  const soon = new Date(Date.now() + 60_000);

  t.equal(await beforeTakeSend(server.dbPool, id, soon), true, "before the give-up time a send may go out, its window recorded first");
  const client = await server.dbPool.connect();
  t.teardown(() => client.release());
  await server.dbPool.query("update hub_hidden.take_request_window set give_up_at = now() - interval '1 second' where take_request_id = $1", [id]);
  t.equal(await sendWindowClosed(client, id, 0), false, "given up, but the recorded send may still land: no refund yet");
  await server.dbPool.query("update hub_hidden.take_request_window set send_expires_at = now() - interval '1 second' where take_request_id = $1", [id]);
  t.equal(await sendWindowClosed(client, id, 0), true, "once its window has passed, a refund may be decided");
  t.equal(await sendWindowClosed(client, id, 5000), false, "not before the allowed clock difference has passed too");
  t.equal(await beforeTakeSend(server.dbPool, id, soon), false, "no send goes out once the hub has given up");
  const { rows } = await server.dbPool.query("select send_expires_at < now() as closed, completion_attempt_count from hub.take_request t join hub_hidden.take_request_window w on w.take_request_id = t.id where t.id = $1", [id]);
  t.same(rows[0], { closed: true, completion_attempt_count: 1 }, "the refused send neither reopened the window nor counted as an attempt");
});
