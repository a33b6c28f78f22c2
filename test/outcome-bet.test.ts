import "./helpers/env.js";
import path from "node:path";
import pg from "pg";
import t, { type Test } from "tap";
import { defaultPlugins, HubGameConfigPlugin, type OutcomeBetConfigMap, type CustomGameConfigMap, type RiskPolicy } from "@hubpkg/hub";
import {
  clientSeedForOutcome,
  createCasino,
  createCurrency,
  createExperience,
  createGraphQLClient,
  createHashChain,
  createHouseBankroll,
  createPlayer,
  createPlayerBalance,
  getHouseBankroll,
  getPlayerBalance,
  startTestServer,
  type GraphQLClient,
  type TestServer,
} from "@hubpkg/hub/test";
import { verifyHashChain, verifyOutcomeBet } from "@hubpkg/hub/hash-chain";
import { makeOperator } from "./helpers/credentials.js";
import { ROOT, startServerProcess, type ServerProcess } from "./helpers/process.js";
import { errorOf } from "./helpers/graphql-error.js";
import { injectClient } from "./helpers/inject.js";
import { shownLimit } from "./helpers/risk.js";
import { createBetStateReads, readBetState } from "../dist/src/fair/bet-state.js";

/*
 * hubMakeOutcomeBet (through inject(), and over HTTP to a second hub process): every refusal, the risk and hash-chain errors
 * of the result union, the request shapes existing frontends send, a bet
 * whose outcome the test chose, and one player's concurrent bets on one chain
 * in one and in two hub processes, with the books checked after each.
 */

const riskPolicy: RiskPolicy = ({ bankroll }) => ({ maxPayout: bankroll * 0.01 });
const outcomeBetConfigs: OutcomeBetConfigMap<"GENERAL" | "DICE" | "HIGH"> = {
  GENERAL: { houseEdge: 0.01, saveOutcomes: true, riskPolicy },
  DICE: { houseEdge: 0.01, saveOutcomes: false },
  // A policy that limits nothing: only whether the bankroll covers the largest win.
  HIGH: { houseEdge: 0.01, saveOutcomes: false, riskPolicy: () => ({ maxPayout: Number.MAX_SAFE_INTEGER }) },
};
const customGameConfigs: CustomGameConfigMap<"TOWER"> = { TOWER: { riskPolicy } };

const BANKROLL = 10_000_000;
const BALANCE = 1_000_000;
/** Evens with a 1% edge: win 0.98, lose the wager. */
const COIN = [{ weight: 1, profit: 0.98 }, { weight: 1, profit: -1 }];

let hub: TestServer;
let casinoId: string;
let experienceId: string;

interface P { userId: string; client: GraphQLClient }

t.before(async () => {
  hub = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    plugins: [...defaultPlugins, HubGameConfigPlugin({ outcomeBetConfigs, customGameConfigs, hashChainLength: 1000 })],
  });
  casinoId = (await createCasino(hub.dbPool, { name: "outcomes" })).id;
  await createCurrency(hub.dbPool, { casinoId, key: "BTC", displayUnitName: "bits", displayUnitScale: 100 });
  experienceId = (await createExperience(hub.dbPool, { casinoId })).id;
  await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: "BTC", amount: BANKROLL });
});
t.teardown(() => hub?.stop());

let players = 0;
async function player(balance = BALANCE): Promise<P> {
  const userId = (await createPlayer(hub.dbPool, { casinoId, uname: `p${++players}` })).id;
  if (balance > 0) await createPlayerBalance(hub.dbPool, { userId, experienceId, currencyKey: "BTC", amount: balance });
  return { userId, client: injectClient(hub, { authorization: `session:${(await hub.authenticate(userId, experienceId)).token}` }) };
}

const BET = `mutation Bet($input: HubMakeOutcomeBetInput!) {
  hubMakeOutcomeBet(input: $input) {
    result {
      __typename
      ... on HubBadHashChainError { message }
      ... on HubRiskError { message riskLimits { maxPayout } }
      ... on HubMakeOutcomeBetSuccess { bet { id kind wager profit net outcomes { weight profit } outcomeIdx currencyKey hashId userId casinoId experienceId metadata hubHashByHashId { iteration digest clientSeed kind } } }
    }
  }
}`;

async function chainOf(p: P): Promise<string> {
  const r = await p.client.request<any>("mutation { hubCreateHashChain { hashChain { id } } }");
  return r.hubCreateHashChain.hashChain.id;
}

function bet(p: P, input: Record<string, unknown>) {
  return p.client.request<any>(BET, { input: { kind: "GENERAL", wager: 100, currency: "BTC", outcomes: COIN, clientSeed: "seed", ...input } }).then((r) => r.hubMakeOutcomeBet.result);
}


/** The books: per account, the ledger sums to the amount; the casino's player and house deltas cancel. */
async function checkBooks(t: Test) {
  const { rows } = await hub.dbPool.query<{ bad: number; total: number }>(
    `select
       (select count(*) from hub.balance b where b.casino_id = $1 and b.amount <> (select coalesce(sum(amount_delta), 0) from hub.ledger l
          where l.account = 'player' and l.user_id = b.user_id and l.experience_id = b.experience_id and l.currency_key = b.currency_key))::int
       + (select count(*) from hub.bankroll r where r.casino_id = $1 and r.amount <> (select coalesce(sum(amount_delta), 0) from hub.ledger l
          where l.account = 'house' and l.casino_id = r.casino_id and l.currency_key = r.currency_key))::int as bad,
       (select coalesce(sum(net), 0) from hub.outcome_bet where casino_id = $1)::float8
         + (select coalesce(sum(amount_delta), 0) from hub.ledger where casino_id = $1 and account = 'house' and bet_id is not null)::float8 as total`,
    [casinoId],
  );
  t.equal(rows[0]!.bad, 0, "every balance and bankroll equals the sum of its ledger rows");
  t.equal(rows[0]!.total, 0, "player + house = 0 over all bets");
}

t.test("refusals: each a GraphQL error with its code; nothing moves, the chain is not consumed", async (t) => {
  const p = await player(1000);
  const hashChainId = await chainOf(p);
  const cases: [string, Record<string, unknown>, string, RegExp][] = [
    ["one outcome", { outcomes: [{ weight: 1, profit: -1 }] }, "INVALID_OUTCOMES", /2 to 1000 outcomes; received 1/],
    ["1001 outcomes", { outcomes: Array.from({ length: 1001 }, () => ({ weight: 1, profit: -1 })) }, "INVALID_OUTCOMES", /received 1001/],
    ["a negative weight", { outcomes: [{ weight: -1, profit: 0.98 }, { weight: 2, profit: -1 }] }, "INVALID_OUTCOMES", /weight -1/],
    ["zero total weight", { outcomes: [{ weight: 0, profit: 0.98 }, { weight: 0, profit: -1 }] }, "INVALID_OUTCOMES", /sum to 0/],
    ["a profit below -1", { outcomes: [{ weight: 1, profit: 0.5 }, { weight: 1, profit: -1.5 }] }, "INVALID_OUTCOMES", /profit -1.5/],
    ["a player edge", { outcomes: [{ weight: 1, profit: 1 }, { weight: 1, profit: -1 }] }, "HOUSE_EDGE_TOO_LOW", /mean profit is 0; bets of kind GENERAL need at most -0.01/],
    ["an edge just under the house's", { outcomes: [{ weight: 1, profit: 0.99 }, { weight: 1, profit: -1 }] }, "HOUSE_EDGE_TOO_LOW", /-0.005/],
    ["wager 0", { wager: 0 }, "INVALID_AMOUNT", /at least 1; received 0/],
    ["a negative wager", { wager: -5 }, "INVALID_AMOUNT", /received -5/],
    ["a wager above the balance", { wager: 1001 }, "INSUFFICIENT_FUNDS", /wager is 1001 BTC but the balance is 1000 BTC/],
    ["an unknown currency", { currency: "DOGE" }, "UNKNOWN_CURRENCY", /"DOGE"/],
    ["a 33-character client seed", { clientSeed: "x".repeat(33) }, "INVALID_CLIENT_SEED", /33 characters/],
    ["a control character in the client seed", { clientSeed: "a\u0007b" }, "INVALID_CLIENT_SEED", /control characters/],
    // NUL is refused for every string argument before any resolver runs.
    ["a NUL in the client seed", { clientSeed: "a\u0000b" }, "BAD_USER_INPUT", /NUL character/],
  ];
  for (const [name, input, code, message] of cases) {
    const error = await errorOf(bet(p, { hashChainId, ...input }));
    t.equal(error.extensions?.code, code, `${name}: ${code}`);
    t.match(error.message, message, `${name}: says what was received and expected`);
  }
  // Literals the JSON variables cannot carry: an infinite weight or profit, a kind not configured.
  const literal = (outcomes: string, kind = "GENERAL") =>
    p.client.request(`mutation { hubMakeOutcomeBet(input: { kind: ${kind}, wager: 10, currency: "BTC", hashChainId: "${hashChainId}", clientSeed: "s", outcomes: ${outcomes} }) { result { __typename } } }`);
  t.equal((await errorOf(literal("[{ weight: 1e999, profit: -1 }, { weight: 1, profit: -1 }]"))).extensions?.code, "INVALID_OUTCOMES", "an infinite weight");
  t.equal((await errorOf(literal("[{ weight: 1, profit: 1e999 }, { weight: 1, profit: -1 }]"))).extensions?.code, "INVALID_OUTCOMES", "an infinite profit");
  t.equal((await errorOf(literal("[{ weight: 1, profit: -1 }, { weight: 1, profit: -1 }]", "ROULETTE"))).extensions?.code, "GRAPHQL_VALIDATION_FAILED", "a kind that is not configured");
  t.equal((await errorOf(literal("[{ weight: 1, profit: -1 }, { weight: 1, profit: -1 }]", "TOWER"))).extensions?.code, "GRAPHQL_VALIDATION_FAILED", "a custom game's kind is not an outcome bet kind");
  t.equal((await errorOf(createGraphQLClient(hub.url).request(BET, { input: { kind: "GENERAL", wager: 1, currency: "BTC", outcomes: COIN, hashChainId, clientSeed: "" } }))).extensions?.code, "UNAUTHENTICATED");
  const operator = await makeOperator(hub.superuserDatabaseUrl);
  t.equal((await errorOf(createGraphQLClient(hub.url, operator.header).request(BET, { input: { kind: "GENERAL", wager: 1, currency: "BTC", outcomes: COIN, hashChainId, clientSeed: "" } }))).extensions?.code, "FORBIDDEN");

  t.equal((await getPlayerBalance(hub.dbPool, { userId: p.userId, experienceId, currencyKey: "BTC" }))!.amount, 1000, "the balance did not move");
  const chain = await hub.dbPool.query("select current_iteration, max_iteration from hub.hash_chain where id = $1", [hashChainId]);
  t.equal(chain.rows[0].current_iteration, chain.rows[0].max_iteration, "no iteration was consumed");
  const noBalance = await player(0);
  const e = await errorOf(bet(noBalance, { hashChainId: await chainOf(noBalance) }));
  t.equal(e.extensions?.code, "INSUFFICIENT_FUNDS", "a player without a balance in the currency");
});

t.test("HubRiskError: a payout above the policy's maxPayout for this bankroll", async (t) => {
  const p = await player();
  const hashChainId = await chainOf(p);
  const bankroll = (await getHouseBankroll(hub.dbPool, { casinoId, currencyKey: "BTC" }))!.amount;
  // What a player is shown and held to: the policy's 1%, rounded down (a player learns no bankroll).
  const maxPayout = shownLimit(Math.floor(bankroll * 0.01));
  // 10x: pays wager × 10.
  const tenX = [{ weight: 1, profit: 8.9 }, { weight: 9, profit: -1 }];
  const refused = await bet(p, { hashChainId, outcomes: tenX, wager: Math.floor(maxPayout / 9.9) + 10 });
  t.equal(refused.__typename, "HubRiskError");
  t.equal(refused.riskLimits.maxPayout, maxPayout, "riskLimits.maxPayout is 1% of the bankroll, rounded down");
  t.match(refused.message, /may pay now is/);
  const limits = await p.client.request<any>("{ hubRiskLimits(gameKinds: [GENERAL, DICE, TOWER]) { currency gameKind maxPayout } }");
  t.same(limits.hubRiskLimits, [
    { currency: "BTC", gameKind: "GENERAL", maxPayout },
    { currency: "BTC", gameKind: "DICE", maxPayout: shownLimit(bankroll) },
    { currency: "BTC", gameKind: "TOWER", maxPayout },
  ], "hubRiskLimits: each kind's limit in each currency of the casino (DICE has no policy: the bankroll)");
  const accepted = await bet(p, { hashChainId, outcomes: tenX, wager: Math.floor(maxPayout / 9.9) - 10 });
  t.equal(accepted.__typename, "HubMakeOutcomeBetSuccess", "a bet under the limit is played");
});

t.test("HubBadHashChainError: another player's chain, a retired one, a revealed one, an exhausted one", async (t) => {
  const p = await player();
  const other = await player();
  const othersChain = await chainOf(other);
  t.equal((await bet(p, { hashChainId: othersChain })).__typename, "HubBadHashChainError", "another player's chain");
  const retired = await chainOf(p);
  await chainOf(p);
  t.equal((await bet(p, { hashChainId: retired })).__typename, "HubBadHashChainError", "a retired chain");
  const revealed = await chainOf(p);
  await p.client.request(`mutation { hubRevealHashChain(input: { hashChainId: "${revealed}" }) { preimageHash { id } } }`);
  t.equal((await bet(p, { hashChainId: revealed })).__typename, "HubBadHashChainError", "a revealed chain");
  const short = await createHashChain(hub.dbPool, { userId: p.userId, casinoId, experienceId, maxIteration: 3 });
  t.equal((await bet(p, { hashChainId: short.id })).__typename, "HubMakeOutcomeBetSuccess", "h(2)");
  t.equal((await bet(p, { hashChainId: short.id })).__typename, "HubMakeOutcomeBetSuccess", "h(1)");
  const exhausted = await bet(p, { hashChainId: short.id });
  t.equal(exhausted.__typename, "HubBadHashChainError", "exhausted after maxIteration - 1 bets");
  t.match(exhausted.message, /exhausted/);
  t.equal((await bet(p, { hashChainId: "00000000-0000-4000-8000-000000000000" })).__typename, "HubBadHashChainError", "an unknown id");
});

t.test("a bet whose outcome the test chose, verified with the shipped verifier", async (t) => {
  const p = await player();
  const hashChainId = await chainOf(p);
  for (const outcomeIdx of [0, 1, 0]) {
    const clientSeed = await clientSeedForOutcome(hub.dbPool, { hashChainId, outcomes: COIN, outcomeIdx });
    const before = (await getPlayerBalance(hub.dbPool, { userId: p.userId, experienceId, currencyKey: "BTC" }))!.amount;
    const result = await bet(p, { hashChainId, clientSeed, wager: 1000, metadata: { round: outcomeIdx } });
    t.equal(result.bet.outcomeIdx, outcomeIdx, `outcome ${outcomeIdx} as chosen`);
    t.equal(result.bet.net, outcomeIdx === 0 ? 980 : -1000);
    t.same(result.bet.metadata, { round: outcomeIdx });
    t.same(result.bet.outcomes, COIN, "saveOutcomes: the outcomes are stored");
    t.equal((await getPlayerBalance(hub.dbPool, { userId: p.userId, experienceId, currencyKey: "BTC" }))!.amount, before + result.bet.net);
    const hash = result.bet.hubHashByHashId;
    t.same([hash.kind, hash.clientSeed], ["INTERMEDIATE", clientSeed]);
    t.same(verifyOutcomeBet({ hash: Buffer.from(hash.digest, "base64"), clientSeed, outcomes: COIN, outcomeIdx, profit: result.bet.profit }), { ok: true, expectedOutcomeIdx: outcomeIdx });
  }
  const dice = await bet(p, { hashChainId, kind: "DICE" });
  t.same(dice.bet.outcomes, [], "saveOutcomes false: no outcomes stored");
  const ledger = await hub.dbPool.query("select actor, reason from hub.ledger where bet_id = $1 order by account", [dice.bet.id]);
  t.ok(ledger.rows.every((r) => r.actor === "hub:hubMakeOutcomeBet" && r.reason === "outcome bet DICE"), "the ledger names the bet, who and why");
  const bankroll = await hub.dbPool.query("select bets, wagered, expected_value from hub.bankroll where casino_id = $1", [casinoId]);
  t.ok(bankroll.rows[0].bets > 0 && bankroll.rows[0].wagered > 0, "the bankroll counts bets and wagered");
  await checkBooks(t);
});

t.test("the original frontends' requests, as written", async (t) => {
  const p = await player();
  // The documents of the published experience templates, verbatim.
  const created = await p.client.request<any>(`
  mutation CreateHashChain {
    hubCreateHashChain {
      hashChain {
        id
      }
    }
  }
`);
  const hashChainId = created.hubCreateHashChain.hashChain.id;
  const makeBet = `
  mutation MakeCoinflipBet($input: HubMakeOutcomeBetInput!) {
    hubMakeOutcomeBet(input: $input) {
      result {
        __typename
        ... on HubBadHashChainError {
          message
        }
        ... on HubMakeOutcomeBetSuccess {
          __typename
          bet {
            id
            wager
            profit
            hubCurrencyByCurrencyKeyAndCasinoId {
              key
              displayUnitName
              displayUnitScale
            }
          }
        }
      }
    }
  }
`;
  const houseEdge = 0.01;
  const input = { kind: "GENERAL", wager: 100, currency: "BTC", hashChainId, clientSeed: String(Math.random()), outcomes: [
    { weight: 0.5, profit: (1 - houseEdge) / 0.5 - 1 },
    { weight: 0.5, profit: -1 },
  ] };
  const r = await p.client.request<any>(makeBet, { input });
  t.equal(r.hubMakeOutcomeBet.result.__typename, "HubMakeOutcomeBetSuccess");
  t.same(r.hubMakeOutcomeBet.result.bet.hubCurrencyByCurrencyKeyAndCasinoId, { key: "BTC", displayUnitName: "bits", displayUnitScale: 100 });
  const me = await p.client.request<any>("query { hubCurrentUser { id activeHashChain { id currentIteration maxIteration } } }");
  t.same(me.hubCurrentUser.activeHashChain, { id: hashChainId, currentIteration: 999, maxIteration: 1000 });
  const reveal = await p.client.request<any>(`mutation RevealHashChain($input: HubRevealHashChainInput!) { hubRevealHashChain(input: $input) { preimageHash { id digest iteration kind } } }`, { input: { hashChainId } });
  t.equal(reveal.hubRevealHashChain.preimageHash.kind, "PREIMAGE");
});

/** Bets of one player on one chain, 2 per request (aliases) so that 250 requests stay within one player's 259 in progress. */
async function concurrentBets(clients: GraphQLClient[], hashChainId: string, count: number) {
  const doc = `mutation Two($input: HubMakeOutcomeBetInput!) {
    a: hubMakeOutcomeBet(input: $input) { result { __typename ... on HubMakeOutcomeBetSuccess { bet { id net } } } }
    b: hubMakeOutcomeBet(input: $input) { result { __typename ... on HubMakeOutcomeBetSuccess { bet { id net } } } }
  }`;
  const input = { kind: "DICE", wager: 10, currency: "BTC", outcomes: COIN, hashChainId, clientSeed: "same" };
  const results = await Promise.all(Array.from({ length: count / 2 }, (_, i) => clients[i % clients.length]!.request<any>(doc, { input })));
  return results.flatMap((r) => [r.a.result, r.b.result]);
}

async function checkIterations(t: Test, hashChainId: string, count: number) {
  const { rows } = await hub.dbPool.query<{ iteration: number }>(
    "select h.iteration from hub.outcome_bet b join hub.hash h on h.id = b.hash_id where h.hash_chain_id = $1 order by h.iteration desc",
    [hashChainId],
  );
  t.equal(rows.length, count, `${count} bets stored`);
  t.equal(new Set(rows.map((r) => r.iteration)).size, count, `${count} distinct iterations`);
  t.same(rows.map((r) => r.iteration), Array.from({ length: count }, (_, i) => 999 - i), "h(999) down to h(1000 - count), none skipped, none twice");
}

t.test("500 concurrent bets by one player on one chain: 500 distinct iterations", async (t) => {
  const userId = (await createPlayer(hub.dbPool, { casinoId, uname: "concurrent" })).id;
  await createPlayerBalance(hub.dbPool, { userId, experienceId, currencyKey: "BTC", amount: BALANCE });
  const { token } = await hub.authenticate(userId, experienceId);
  const chain = await createHashChain(hub.dbPool, { userId, casinoId, experienceId, maxIteration: 1000 });
  const results = await concurrentBets([injectClient(hub, { authorization: `session:${token}` })], chain.id, 500);
  t.equal(results.filter((r) => r.__typename === "HubMakeOutcomeBetSuccess").length, 500, "every bet played");
  await checkIterations(t, chain.id, 500);
  const balance = (await getPlayerBalance(hub.dbPool, { userId, experienceId, currencyKey: "BTC" }))!.amount;
  t.equal(balance, BALANCE + results.reduce((s, r) => s + r.bet.net, 0), "the balance moved by the sum of the nets");
  await checkBooks(t);
});

t.test("the same across two hub processes on one database", async (t) => {
  let second: ServerProcess | undefined;
  try {
    second = await startServerProcess({
      DATABASE_URL: hub.databaseUrl,
      SUPERUSER_DATABASE_URL: hub.superuserDatabaseUrl,
      HUB_CONFIG: path.join(ROOT, "test/fixtures/config-outcome-bets.mjs"),
    });
    const userId = (await createPlayer(hub.dbPool, { casinoId, uname: "two-processes" })).id;
    await createPlayerBalance(hub.dbPool, { userId, experienceId, currencyKey: "BTC", amount: BALANCE });
    const { token } = await hub.authenticate(userId, experienceId);
    const chain = await createHashChain(hub.dbPool, { userId, casinoId, experienceId, maxIteration: 1000 });
    const authorization = `session:${token}`;
    const results = await concurrentBets([injectClient(hub, { authorization }), createGraphQLClient(second.url, { authorization })], chain.id, 500);
    t.equal(results.filter((r) => r.__typename === "HubMakeOutcomeBetSuccess").length, 500, "every bet played");
    await checkIterations(t, chain.id, 500);
    // Both processes derived hashes of the same chain: all of them are its hashes.
    const { rows: [preimage] } = await hub.dbPool.query("select seed from hub_secret.hash_chain_secret where hash_chain_id = $1", [chain.id]);
    const { rows: hashes } = await hub.dbPool.query("select iteration, digest from hub.hash where hash_chain_id = $1", [chain.id]);
    t.same(verifyHashChain({ preimage: preimage.seed, terminalHash: chain.terminalHash, maxIteration: 1000, hashes }), { ok: true }, "every hash is the chain's");
    await checkBooks(t);
  } finally {
    if (second) {
      second.child.kill("SIGTERM");
      await second.exited;
    }
  }
});

t.test("40 players win at once against a bankroll that covers 10 wins: 10 paid, 30 refused cleanly, never below 0", async (t) => {
  // Every bet is made to win its whole wager (the seed draws outcome 0), so
  // the bankroll only shrinks: exactly bankroll / wager bets can be paid. A
  // bet that read the bankroll before others' wins committed passes the risk
  // check and must be refused by the final write's guard instead.
  const WAGER = 1000;
  const WIN = [{ weight: 49, profit: 1 }, { weight: 51, profit: -1 }];
  await createCurrency(hub.dbPool, { casinoId, key: "SMALL", displayUnitName: "small", displayUnitScale: 1 });
  await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: "SMALL", amount: 10 * WAGER });
  const bettors = await Promise.all(
    Array.from({ length: 40 }, async () => {
      const p = await player(0);
      await createPlayerBalance(hub.dbPool, { userId: p.userId, experienceId, currencyKey: "SMALL", amount: WAGER });
      const hashChainId = await chainOf(p);
      const clientSeed = await clientSeedForOutcome(hub.dbPool, { hashChainId, outcomes: WIN, outcomeIdx: 0 });
      return { ...p, hashChainId, clientSeed };
    }),
  );
  const results = await Promise.all(
    bettors.map(async (p) => {
      const input = { kind: "HIGH", wager: WAGER, currency: "SMALL", outcomes: WIN, hashChainId: p.hashChainId, clientSeed: p.clientSeed };
      return (await p.client.request<any>(BET, { input })).hubMakeOutcomeBet.result;
    }),
  );
  const paid = results.filter((r) => r.__typename === "HubMakeOutcomeBetSuccess");
  const refused = results.filter((r) => r.__typename === "HubRiskError");
  t.equal(paid.length, 10, "as many wins as the bankroll covers");
  t.equal(refused.length, 30, "every other bet is a HubRiskError");
  t.ok(paid.every((r) => r.bet.net === WAGER && r.bet.outcomeIdx === 0), "each paid bet won its wager");
  t.ok(refused.every((r) => /cannot cover this bet's largest win in SMALL/.test(r.message)), "each refusal names the bankroll");
  t.equal((await getHouseBankroll(hub.dbPool, { casinoId, currencyKey: "SMALL" }))!.amount, 0, "the bankroll paid out to exactly 0");
  const { rows } = await hub.dbPool.query<{ user_id: string; amount: number; current_iteration: number; hashes: number; bets: number }>(
    `select b.user_id, b.amount, c.current_iteration,
            (select count(*) from hub.hash h where h.hash_chain_id = c.id and h.kind = 'INTERMEDIATE')::int as hashes,
            (select count(*) from hub.outcome_bet o where o.user_id = b.user_id and o.currency_key = 'SMALL')::int as bets
       from hub.balance b join hub.hash_chain c on c.user_id = b.user_id and c.active
      where b.currency_key = 'SMALL' and b.casino_id = $1`,
    [casinoId],
  );
  const winners = new Set(paid.map((r) => r.bet.userId));
  t.equal(rows.length, 40);
  for (const row of rows) {
    const won = winners.has(row.user_id);
    // A refused bet consumed and revealed no hash: the player can bet with the same seed again.
    t.same([row.amount, row.current_iteration, row.hashes, row.bets], won ? [2 * WAGER, 999, 1, 1] : [WAGER, 1000, 0, 0], won ? "a winner" : "a refused player");
  }
  const ledger = await hub.dbPool.query("select count(*)::int as n from hub.ledger where currency_key = 'SMALL' and casino_id = $1 and bet_id is not null", [casinoId]);
  t.equal(ledger.rows[0].n, 20, "two ledger rows per paid bet, none for a refusal");
  await checkBooks(t);
});

t.test("bets arriving together read their state in a few queries, each its own; a bad key fails only its own read", async (t) => {
  // Chains of the plugin's length: a read takes the chain's row whatever its length, and the default
  // length (100,000 hashes) would hash 40 chains on 40 worker threads.
  const CHAIN = 1000;
  const ps = await Promise.all(Array.from({ length: 40 }, (_, i) => player(1_000 + i)));
  const keys = await Promise.all(
    ps.map(async (p) => ({ currency: "BTC", casinoId, experienceId, userId: p.userId, hashChainId: (await createHashChain(hub.dbPool, { userId: p.userId, casinoId, experienceId, maxIteration: CHAIN })).id })),
  );
  const pool = new pg.Pool({ connectionString: hub.superuserDatabaseUrl, max: 4 });
  t.teardown(() => pool.end());
  const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
  let queries = 0;
  pool.query = ((...args: unknown[]) => (queries++, query(...args))) as typeof pool.query;
  const reads = createBetStateReads();

  const alone = await Promise.all(keys.map((k) => readBetState(hub.dbPool, k)));
  t.same(alone.map((s) => s?.balance), ps.map((_, i) => 1_000 + i), "read alone: each player's own balance");
  const together = await Promise.all(keys.map((k) => reads(pool, k)));
  t.same(together, alone, "read together: each bet's state exactly as read alone");
  // The first goes at once, alone; the others wait for it and leave together (one query each before).
  t.ok(queries <= 3, `${queries} queries for ${keys.length} bets`);

  queries = 0;
  const [first, badChain, unknownCurrency, last] = await Promise.allSettled([
    reads(pool, keys[0]!),
    reads(pool, { ...keys[1]!, hashChainId: "not-a-uuid" }),
    reads(pool, { ...keys[2]!, currency: "NOPE" }),
    reads(pool, keys[3]!),
  ]);
  t.same(first, { status: "fulfilled", value: alone[0] }, "a good key beside bad ones: its state");
  t.same(last, { status: "fulfilled", value: alone[3] }, "and another");
  t.equal(badChain.status === "rejected" && (badChain.reason as { code?: string }).code, "22P02", "a chain id that is not a UUID: only its own read fails");
  t.same(unknownCurrency, { status: "fulfilled", value: undefined }, "an unknown currency: no state");
});

t.test("HubGameConfigPlugin refuses a configuration it cannot serve, naming the field", async (t) => {
  const bad: [string, Parameters<typeof HubGameConfigPlugin>[0], RegExp][] = [
    ["a kind that is no enum value", { outcomeBetConfigs: { "dice-1": { houseEdge: 0.01, saveOutcomes: false } } }, /"dice-1" is not a GraphQL enum value/],
    ["a kind in both maps", { outcomeBetConfigs: { DICE: { houseEdge: 0.01, saveOutcomes: false } }, customGameConfigs: { DICE: {} } }, /both an outcome bet kind and a custom game kind/],
    ["a house edge of 1", { outcomeBetConfigs: { DICE: { houseEdge: 1, saveOutcomes: false } } }, /outcomeBetConfigs.DICE.houseEdge must be a number from 0 to below 1; received 1/],
    ["a negative house edge", { outcomeBetConfigs: { DICE: { houseEdge: -0.01, saveOutcomes: false } } }, /received -0.01/],
    ["saveOutcomes missing", { outcomeBetConfigs: { DICE: { houseEdge: 0.01 } as never } }, /saveOutcomes must be true or false/],
    ["a policy that is not a function", { customGameConfigs: { TOWER: { riskPolicy: 5 as never } } }, /customGameConfigs.TOWER.riskPolicy must be a function/],
    ["a chain of 1 hash", { hashChainLength: 1 }, /hashChainLength must be a whole number from 2 to 1000000; received 1/],
  ];
  for (const [name, options, message] of bad) t.throws(() => HubGameConfigPlugin(options), message, name);
});
