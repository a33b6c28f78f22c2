import "./helpers/env.js";
import t from "tap";
import { defaultPlugins, HubGameConfigPlugin, type RiskPolicy } from "@hubpkg/hub";
import { createCasino, createCurrency, createExperience, createHouseBankroll, createPlayer, createPlayerBalance, startTestServer } from "@hubpkg/hub/test";

/**
 * A player must not learn the house bankroll from its risk limits: what
 * hubRiskLimits shows and what a refused bet reports are rounded down to
 * 1, 2 or 5 × a power of ten, and bets are held to that rounded limit (else
 * bisecting wagers would find the exact one, hence the bankroll).
 */
const BANKROLL = 1_234_567;
const onePercent: RiskPolicy = ({ bankroll }) => ({ maxPayout: bankroll * 0.01 });

t.test("risk limits tell a player no bankroll", async (t) => {
  const hub = await startTestServer({
    plugins: [
      ...defaultPlugins,
      HubGameConfigPlugin({
        outcomeBetConfigs: { GENERAL: { houseEdge: 0.01, saveOutcomes: false, riskPolicy: onePercent }, DICE: { houseEdge: 0.01, saveOutcomes: false } },
        hashChainLength: 1000,
      }),
    ],
  });
  t.teardown(() => hub.stop());
  const casinoId = (await createCasino(hub.dbPool, { name: "vault" })).id;
  await createCurrency(hub.dbPool, { casinoId, key: "BTC", displayUnitName: "satoshi", displayUnitScale: 1 });
  const experienceId = (await createExperience(hub.dbPool, { casinoId })).id;
  await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: "BTC", amount: BANKROLL });
  const userId = (await createPlayer(hub.dbPool, { casinoId, uname: "prober" })).id;
  await createPlayerBalance(hub.dbPool, { userId, experienceId, currencyKey: "BTC", amount: 1_000_000 });
  const { graphqlClient: client } = await hub.authenticate(userId, experienceId);

  const limits = await client.request<any>("{ hubRiskLimits(gameKinds: [GENERAL, DICE]) { currency gameKind maxPayout } }");
  t.same(
    limits.hubRiskLimits,
    [
      { currency: "BTC", gameKind: "GENERAL", maxPayout: 10_000 },
      { currency: "BTC", gameKind: "DICE", maxPayout: 1_000_000 },
    ],
    `hubRiskLimits: 1% of ${BANKROLL} (12,345) shown as 10,000; no policy (the bankroll) as 1,000,000`,
  );

  const hashChainId = (await client.request<any>("mutation { hubCreateHashChain { hashChain { id } } }")).hubCreateHashChain.hashChain.id;
  const BET = `mutation($input: HubMakeOutcomeBetInput!) { hubMakeOutcomeBet(input: $input) { result {
    __typename ... on HubRiskError { message riskLimits { maxPayout } } } } }`;
  // Pays wager × 9.9 at most. 1,150 × 9.9 = 11,385: under the exact 1% (12,345), over the limit shown.
  const tenX = [{ weight: 1, profit: 8.9 }, { weight: 9, profit: -1 }];
  const bet = (wager: number, kind = "GENERAL") =>
    client.request<any>(BET, { input: { kind, wager, currency: "BTC", outcomes: tenX, clientSeed: "s", hashChainId } }).then((r) => r.hubMakeOutcomeBet.result);
  const between = await bet(1_150);
  t.match(between, { __typename: "HubRiskError", riskLimits: { maxPayout: 10_000 } }, "a bet between the shown and the exact limit is refused, reporting the shown limit");
  t.notMatch(String(between.message), /12345|1234567/, `the message names no exact figure: ${between.message}`);
  t.equal((await bet(1_000)).__typename, "HubMakeOutcomeBetSuccess", "a bet at the shown limit is played");
  const dice = await bet(110_000, "DICE");
  t.match(dice, { __typename: "HubRiskError", riskLimits: { maxPayout: 1_000_000 } }, "without a policy: refused over the shown limit, which is not the bankroll");
});
