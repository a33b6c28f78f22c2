import "./helpers/env.js";
import t from "tap";
import { defaultPlugins, type PluginContext } from "@hubpkg/hub";
import { startTestServer, type TestServer } from "@hubpkg/hub/test";
import { makeExtendSchemaPlugin, gql } from "@hubpkg/hub/graphile";
import { GraphQLError } from "@hubpkg/hub/graphql";
import { dbLockPlayerBalanceAndHouseBankroll, superuserPool, withPgPoolTransaction } from "@hubpkg/hub/db";
import { gql as post } from "./helpers/http.js";
import { makePlayer } from "./helpers/credentials.js";

/*
 * A game written as the original's template writes its coinflip: the lock
 * helpers, then the balance and bankroll updated by the payout. A win of
 * wager × 1.98 − wager is a fraction; the hub answers INVALID_AMOUNT with the
 * amount and the fix (issue 47, point 7).
 */

const payout = { exact: (wager: number) => wager * 1.98 - wager, floored: (wager: number) => Math.floor(wager * 1.98) - wager };

const CoinflipPlugin = makeExtendSchemaPlugin(() => ({
  typeDefs: gql`
    extend type Mutation {
      templateCoinflip(wager: Int!, currency: String!, floor: Boolean!): Float
    }
  `,
  resolvers: {
    Mutation: {
      async templateCoinflip(_parent: unknown, args: { wager: number; currency: string; floor: boolean }, ctx: PluginContext) {
        if (ctx.identity?.kind !== "user") throw new GraphQLError("Unauthorized");
        const { session } = ctx.identity;
        return withPgPoolTransaction(superuserPool, async (pgClient) => {
          const locked = await dbLockPlayerBalanceAndHouseBankroll(pgClient, {
            userId: session.user_id,
            casinoId: session.casino_id,
            experienceId: session.experience_id,
            currencyKey: args.currency,
          });
          if (!locked.found) throw new GraphQLError("No balance or bankroll");
          // Always a win here: the test is about the credit.
          const net = (args.floor ? payout.floored : payout.exact)(args.wager);
          await pgClient.query("update hub.balance set amount = amount + $1 where id = $2", [net, locked.dbPlayerBalance.id]);
          await pgClient.query("update hub.bankroll set amount = amount - $1 where id = $2", [net, locked.dbHouseBankroll.id]);
          return net;
        });
      },
    },
  },
}));

let hub: TestServer;
t.before(async () => {
  hub = await startTestServer({ logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent", plugins: [...defaultPlugins, CoinflipPlugin] });
});
t.teardown(() => hub?.stop());

t.test("a fractional credit through the lock helpers is INVALID_AMOUNT, naming the amount and the fix", async (t) => {
  const p = await makePlayer(hub.superuserDatabaseUrl, "flipper");
  await hub.dbPool.query("select hub_hidden.ensure_bankroll($1, 'HOUSE', 100000, 'test')", [p.casinoId]);
  await hub.dbPool.query("select hub_hidden.credit_balance($1, $2, $3, 'HOUSE', 1000, 'test', 'test')", [p.userId, p.casinoId, p.experienceId]);

  const won = await post(hub.url, 'mutation { templateCoinflip(wager: 10, currency: "HOUSE", floor: false) }', {}, p.header);
  const error = won.body.errors?.[0] as { message: string; extensions: Record<string, unknown> } | undefined;
  t.match(error?.extensions, { code: "INVALID_AMOUNT", constraint: "balance_amount_whole" });
  t.equal(
    error?.message,
    `Amounts are whole numbers of base units, and this would set the player's balance to ${1000 + 10 * 1.98 - 10} (constraint "balance_amount_whole" on balance). ` +
      "A payout computed by multiplying must be rounded down before it is written: Math.floor(wager * 1.98) - wager, not wager * 1.98 - wager.",
  );
  const { rows } = await hub.dbPool.query<{ amount: number }>("select amount from hub.balance where user_id = $1", [p.userId]);
  t.equal(rows[0]!.amount, 1000, "nothing moved");

  const floored = await post(hub.url, 'mutation { templateCoinflip(wager: 10, currency: "HOUSE", floor: true) }', {}, p.header);
  t.same(floored.body, { data: { templateCoinflip: 9 } }, "Math.floor: the win is credited");
});
