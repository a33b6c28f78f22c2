/**
 * The result types a game answers with besides its success: HubBadHashChainError,
 * HubRiskError (and its HubRiskLimit). The server always loads them, whatever
 * its plugin list, so any game plugin may name them in its unions whether or
 * not HubGameConfigPlugin is loaded.
 *
 * grafast requires every member of a union (or implementation of an interface)
 * to agree on whether it expects a plan, i.e. whether its type declares
 * `assertStep`. Games written the plan way (a sideEffect returning
 * `{ __typename, … }` objects, success types with `assertStep: ObjectStep`)
 * put these types beside plan-expecting members, so these types expect a plan
 * too, and accept any step: their fields only read properties of the value.
 *
 * A member of such a union that declares no assertStep (a success type with
 * `plans` only, as games written for earlier versions of the hub do) is given
 * the same permissive assertion when the schema is finished, so both ways of
 * writing a game's union keep working.
 */
import type { GraphQLInterfaceType, GraphQLNamedType, GraphQLObjectType, GraphQLSchema, GraphQLUnionType } from "graphql";
import type { Step } from "grafast";
import { extendSchema, gql } from "graphile-utils";

/** The hub's game result types: a union or interface with one of them is aligned (see above). */
export const GAME_RESULT_TYPES: readonly string[] = ["HubBadHashChainError", "HubRiskError"];

/** Any step will do: these types' fields only read the value's own properties. */
function anyStep(_step: Step): asserts _step is Step {}

type GrafastExtensions = { grafast?: { assertStep?: unknown } & Record<string, unknown> };

function expectsPlan(type: GraphQLNamedType): boolean {
  return !!(type.extensions as GrafastExtensions | undefined)?.grafast?.assertStep;
}

/**
 * Members of unions and interfaces that contain one of the game result types
 * and declare no assertStep get the permissive one, so grafast sees them agree.
 */
export function alignGameResultUnions(schema: GraphQLSchema): GraphQLSchema {
  const resultTypes = new Set(GAME_RESULT_TYPES);
  // By tag, not instanceof: a bundler may load a second copy of graphql-js beside the one that built the schema.
  for (const type of Object.values(schema.getTypeMap())) {
    const tag = (type as { [Symbol.toStringTag]?: string })[Symbol.toStringTag];
    const members: readonly GraphQLObjectType[] =
      tag === "GraphQLUnionType" ? (type as GraphQLUnionType).getTypes()
      : tag === "GraphQLInterfaceType" ? schema.getImplementations(type as GraphQLInterfaceType).objects
      : [];
    if (!members.some((member) => resultTypes.has(member.name))) continue;
    for (const member of members) {
      if (expectsPlan(member)) continue;
      const extensions = member.extensions as GrafastExtensions;
      // graphql-js keeps the extensions object as built; grafast reads it when it plans an operation.
      if (extensions.grafast) extensions.grafast.assertStep = anyStep;
      else (extensions as Record<string, unknown>).grafast = { assertStep: anyStep };
    }
  }
  return schema;
}

const resultTypes = extendSchema(
  () => ({
    typeDefs: gql`
      "The chain is not the player's, not active, or exhausted: create a new one (hubCreateHashChain) and retry."
      type HubBadHashChainError {
        message: String!
      }
      "A bet would pay more than the game's risk policy allows for the house bankroll now."
      type HubRiskError {
        message: String!
        riskLimits: HubRiskLimit!
      }
      type HubRiskLimit {
        "The most one bet may pay back (wager included), in base units."
        maxPayout: Float!
      }
    `,
    objects: {
      HubBadHashChainError: { assertStep: anyStep },
      HubRiskError: { assertStep: anyStep },
      HubRiskLimit: { assertStep: anyStep },
    },
  }),
  "HubGameResultTypesPlugin",
);

export const HubGameResultTypesPlugin: GraphileConfig.Plugin = {
  ...resultTypes,
  schema: {
    ...resultTypes.schema,
    hooks: {
      ...resultTypes.schema?.hooks,
      finalize: (schema) => alignGameResultUnions(schema),
    },
  },
};
