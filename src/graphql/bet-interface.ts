import type { GraphQLFieldConfigMap, GraphQLOutputType } from "graphql";
import { access, lambda, type Step } from "grafast";
import type { PgResource } from "@dataplan/pg";
import { betTables, type BetTable } from "../money/bet-history.js";

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

/** The tables tagged @hubBet that GraphQL exposes, with their kind (src/money/bet-history.ts) and type name. */
export function hubBetResources(build: GraphileBuild.Build): { table: BetTable; resource: PgResource; typeName: string }[] {
  const resources = (Object.values(build.input.pgRegistry.pgResources) as PgResource[]).filter(
    (r) => !r.parameters && !r.isVirtual && r.codec.attributes && r.codec.extensions?.tags?.hubBet && r.codec.extensions?.pg,
  );
  const tables = betTables(resources.map((r) => ({ schema: r.codec.extensions!.pg!.schemaName, table: r.codec.extensions!.pg!.name })));
  return resources.map((resource, i) => ({ table: tables[i]!, resource, typeName: build.inflection.tableType(resource.codec) }));
}

/**
 * A `Bet` from a row { kind, id } of the bet history: the type of its table,
 * and that table's row looked up by id (as the request's role, so row-level
 * security applies again).
 */
function betTypePlanner(build: GraphileBuild.Build) {
  let byKind: Map<string, { resource: PgResource; typeName: string }> | undefined;
  const bets = () => (byKind ??= new Map(hubBetResources(build).map((b) => [b.table.kind, b])));
  return ($specifier: Step) => ({
    $__typename: lambda(access($specifier, "kind"), (kind: string) => bets().get(kind)?.typeName ?? null, true),
    planForType(type: { name: string }) {
      const bet = [...bets().values()].find((b) => b.typeName === type.name)!;
      return bet.resource.find({ id: access($specifier, "id") } as never).single();
    },
  });
}

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
            planType: betTypePlanner(build),
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
