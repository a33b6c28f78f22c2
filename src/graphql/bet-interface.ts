import type { GraphQLFieldConfigMap, GraphQLOutputType } from "graphql";

/**
 * `Bet`: the interface every bet type implements, so clients can ask
 * for the fields all bets share whatever the game. A table opts in with the
 * smart comment tag `@hubBet` and must have the columns below (NOT NULL):
 *
 *   id uuid, wager float8, net float8, currency_key text,
 *   user_id uuid, casino_id uuid, experience_id uuid
 *
 *   comment on table app.coinflip is E'@hubBet';
 */
const FIELDS = {
  id: "UUID",
  wager: "Float",
  net: "Float",
  currencyKey: "String",
  userId: "UUID",
  casinoId: "UUID",
  experienceId: "UUID",
} as const;

export const BetInterfacePlugin: GraphileConfig.Plugin = {
  name: "HubBetInterfacePlugin",
  version: "0.1.0",
  schema: {
    hooks: {
      init(_, build) {
        const { GraphQLNonNull } = build.graphql;
        build.registerInterfaceType(
          "Bet",
          {},
          () => ({
            description: "A bet of any game: the fields every bet type shares.",
            fields: () =>
              Object.fromEntries(
                Object.entries(FIELDS).map(([name, scalar]) => [
                  name,
                  { type: new GraphQLNonNull(build.getTypeByName(scalar) as GraphQLOutputType) },
                ]),
              ) as GraphQLFieldConfigMap<unknown, unknown>,
          }),
          "HubBetInterfacePlugin",
        );
        return _;
      },
      GraphQLObjectType_interfaces(interfaces, build, context) {
        const { pgCodec, isPgClassType } = context.scope as { pgCodec?: { extensions?: { tags?: Record<string, unknown> }; name: string }; isPgClassType?: boolean };
        if (!isPgClassType || !pgCodec?.extensions?.tags?.hubBet) return interfaces;
        const bet = build.getTypeByName("Bet");
        if (!bet || !build.graphql.isInterfaceType(bet)) return interfaces;
        return [...interfaces, bet];
      },
    },
  },
};
