/**
 * HubGameConfigPlugin: the games a hub offers and their limits. It defines
 * the enums OutcomeBetKind (the kinds of hubMakeOutcomeBet) and AnyGameKind
 * (those and the custom games' kinds), the mutation hubMakeOutcomeBet, and
 * hubRiskLimits, so a frontend can show the largest bet each game accepts.
 */
import { access, context, lambda, sideEffect } from "grafast";
import { extendSchema, gql } from "graphile-utils";
import type { Identity } from "../auth/identity.js";
import { requirePlayer } from "./hash-chain-plugin.js";
import { createSettleGroups } from "./outcome-settlement.js";
import { createChainQueue } from "./chain-queue.js";
import { serverOfBuild } from "../server-state.js";
import type { ChainSecrets } from "./chain-secret.js";
import { makeOutcomeBet, type CustomGameConfigMap, type MakeOutcomeBetInput, type OutcomeBetConfigMap } from "./outcome-bet.js";
import { playerRiskLimits } from "./risk.js";
import { MAX_HASH_CHAIN_LENGTH } from "./db.js";
import { optionChecker, pathText } from "../option-schema.js";
import { describeValue } from "../errors.js";

type RiskPolicyOf = Parameters<typeof playerRiskLimits>[0];

export interface HubGameConfigOptions {
  outcomeBetConfigs?: OutcomeBetConfigMap<string>;
  customGameConfigs?: CustomGameConfigMap<string>;
  /** Hashes in each chain hubCreateHashChain makes (2 to 1,000,000; default 100,000). */
  hashChainLength?: number;
}

const ENUM_VALUE = /^[_A-Za-z][_0-9A-Za-z]*$/;

const riskPolicy = { isFunction: true, expected: "a function" };

const GAME_CONFIG_SCHEMA = {
  type: "object",
  expected: "an object with outcomeBetConfigs, customGameConfigs and hashChainLength",
  properties: {
    outcomeBetConfigs: {
      type: "object",
      expected: "an object of outcome bet configurations by game kind",
      additionalProperties: {
        type: "object",
        expected: "an object with houseEdge, saveOutcomes and riskPolicy",
        required: ["houseEdge", "saveOutcomes"],
        properties: {
          houseEdge: { type: "number", minimum: 0, exclusiveMaximum: 1, expected: "a number from 0 to below 1" },
          saveOutcomes: { type: "boolean", expected: "true or false" },
          riskPolicy,
        },
      },
    },
    customGameConfigs: {
      type: "object",
      expected: "an object of custom game configurations by game kind",
      additionalProperties: { type: "object", expected: "an object with riskPolicy", properties: { riskPolicy } },
    },
    hashChainLength: { type: "integer", minimum: 2, maximum: MAX_HASH_CHAIN_LENGTH, expected: `a whole number from 2 to ${MAX_HASH_CHAIN_LENGTH}` },
  },
};
const checkGameConfig = optionChecker(GAME_CONFIG_SCHEMA);

function checkOptions(options: HubGameConfigOptions): void {
  const fail = (message: string) => {
    throw new TypeError(`HubGameConfigPlugin: ${message}`);
  };
  const problem = checkGameConfig(options);
  if (problem) fail(`${pathText(problem.path)} must be ${problem.expected}; received ${describeValue(problem.received)}.`);
  // Game kinds become GraphQL enum values, each in one map only.
  const outcome = Object.keys(options.outcomeBetConfigs ?? {});
  const custom = Object.keys(options.customGameConfigs ?? {});
  for (const kind of [...outcome, ...custom]) {
    if (!ENUM_VALUE.test(kind) || ["true", "false", "null"].includes(kind)) fail(`the game kind ${JSON.stringify(kind)} is not a GraphQL enum value (letters, digits and _, not starting with a digit).`);
  }
  for (const kind of outcome) if (custom.includes(kind)) fail(`the game kind ${kind} is both an outcome bet kind and a custom game kind.`);
}

/** hubMakeOutcomeBet's types, for the outcome bet kinds. */
const outcomeTypeDefs = (outcomeKinds: readonly string[]): string => `
      "The kinds of hubMakeOutcomeBet this hub offers (HubGameConfigPlugin's outcomeBetConfigs)."
      enum OutcomeBetKind { ${outcomeKinds.join(" ")} }
      input HubMakeOutcomeBetInput {
        kind: OutcomeBetKind!
        "Whole base units, at least 1 and at most the player's balance."
        wager: Int!
        currency: String!
        "2 to 1000 outcomes; their weighted mean profit must be at most -houseEdge of the kind."
        outcomes: [HubOutcomeInput!]!
        "The player's active chain (hubCreateHashChain)."
        hashChainId: UUID!
        "At most 32 characters, no control characters: mixed into the chain's hash, so the house cannot choose the outcome alone."
        clientSeed: String!
        metadata: JSON
        """
        Optional, 1 to 255 characters: a retry with the same key and input answers the first bet and moves nothing;
        with other input it is refused (IDEMPOTENCY_KEY_REUSED). The player's keys are kept 24 hours.
        """
        idempotencyKey: String
      }
      type HubMakeOutcomeBetPayload {
        result: HubMakeOutcomeBetResult!
      }
      union HubMakeOutcomeBetResult = HubMakeOutcomeBetSuccess | HubBadHashChainError | HubRiskError
      type HubMakeOutcomeBetSuccess {
        bet: HubOutcomeBet!
      }
      extend type Mutation {
        """
        A bet on weighted outcomes, drawn by the player's hash chain and client seed:
        normalizeHash(makeFinalHash(h(i), clientSeed)) over the cumulative weights.
        """
        hubMakeOutcomeBet(input: HubMakeOutcomeBetInput!): HubMakeOutcomeBetPayload
      }`;

/** AnyGameKind and hubRiskLimits, for every game kind. */
const kindTypeDefs = (allKinds: readonly string[]): string => `
      "Every game kind of this hub: outcome bet kinds and custom games."
      enum AnyGameKind { ${allKinds.join(" ")} }
      type HubBulkRiskLimit {
        currency: String!
        gameKind: AnyGameKind!
        "The most one bet may pay back (wager included) now, in base units."
        maxPayout: Float!
      }
      extend type Query {
        "The risk limit of each game kind in every currency of the player's casino. Needs a player's session."
        hubRiskLimits(gameKinds: [AnyGameKind!]!): [HubBulkRiskLimit!]!
      }`;

/** The plans of hubMakeOutcomeBet and its payload; one chain queue and settle groups per server's schema. */
function outcomeBetObjects(outcomeBetResource: any, outcomeBetConfigs: OutcomeBetConfigMap<string>, chains: ChainSecrets) {
  // Built once per server's schema: each server queues its own bets per chain.
  const chainQueue = createChainQueue();
  const settleGroups = createSettleGroups();
  return {
    Mutation: {
      plans: {
        hubMakeOutcomeBet(_parent: any, fieldArgs: any) {
          const $input = fieldArgs.getRaw("input");
          const $identity = context().get("identity");
          const $pool = context().get("superuserPool");
          return sideEffect([$input, $identity, $pool], async ([input, identity, pool]) => {
            const session = requirePlayer(identity as Identity | undefined);
            const bet = input as MakeOutcomeBetInput;
            return makeOutcomeBet(
              pool as any,
              { userId: session.user_id, casinoId: session.casino_id, experienceId: session.experience_id },
              bet,
              outcomeBetConfigs[bet.kind]!,
              chainQueue,
              settleGroups,
              chains,
            );
          });
        },
      },
    },
    HubMakeOutcomeBetPayload: { plans: { result: ($payload: any) => $payload } },
    HubMakeOutcomeBetSuccess: {
      // Expects a plan, like the union's other members (game-result-types.ts).
      assertStep: () => true,
      plans: { bet: ($result: any) => outcomeBetResource.get({ id: access($result, "betId") }) },
    },
  };
}

type RiskRow = { key: string; display_unit_name: string; display_unit_scale: number; bankroll: number };

/** The plan of hubRiskLimits: each kind's limit in every currency of the player's casino. */
function riskLimitsObjects(policyOf: (kind: string) => RiskPolicyOf) {
  return {
    Query: {
      plans: {
        hubRiskLimits(_parent: any, fieldArgs: any) {
          const $kinds = fieldArgs.getRaw("gameKinds");
          const $identity = context().get("identity");
          const $pool = context().get("superuserPool");
          // Read-only, but it reads the bankroll on the superuser pool: no player sees it otherwise.
          return sideEffect([$kinds, $identity, $pool], async ([kinds, identity, pool]) => {
            const session = requirePlayer(identity as Identity | undefined);
            const { rows } = await (pool as any).query(
              `select c.key, c.display_unit_name, c.display_unit_scale, coalesce(b.amount, 0) as bankroll
                 from hub.currency c left join hub.bankroll b on b.casino_id = c.casino_id and b.currency_key = c.key
                where c.casino_id = $1 order by c.key`,
              [session.casino_id],
            );
            const limits = [];
            for (const row of rows as RiskRow[]) {
              for (const gameKind of new Set(kinds as string[])) {
                const { maxPayout } = playerRiskLimits(policyOf(gameKind), {
                  currency: row.key,
                  bankroll: row.bankroll,
                  displayUnitName: row.display_unit_name,
                  displayUnitScale: row.display_unit_scale,
                });
                limits.push({ currency: row.key, gameKind, maxPayout });
              }
            }
            return limits;
          });
        },
      },
    },
  };
}

const outcomeBetUnions = {
  HubMakeOutcomeBetResult: {
    planType($specifier: any) {
      return {
        $__typename: lambda($specifier, (r: any) => r.__typename as string, true),
        planForType: () => $specifier,
      };
    },
  },
};

/** hubCreateHashChain (HubHashChainPlugin) reads the chain length from the build. */
function withHashChainLength(plugin: GraphileConfig.Plugin, length: number | undefined): GraphileConfig.Plugin {
  if (length === undefined) return plugin;
  const hooks = plugin.schema!.hooks as Record<string, any>;
  const previous = hooks.build;
  return {
    ...plugin,
    schema: {
      ...plugin.schema,
      hooks: {
        ...hooks,
        build(build: any, ...rest: unknown[]) {
          const next = previous ? previous(build, ...rest) : build;
          return next.extend(next, { hubHashChainLength: length }, "HubGameConfigPlugin");
        },
      },
    },
  } as GraphileConfig.Plugin;
}

export function HubGameConfigPlugin(options: HubGameConfigOptions): GraphileConfig.Plugin {
  checkOptions(options);
  const outcomeBetConfigs = options.outcomeBetConfigs ?? {};
  const customGameConfigs = options.customGameConfigs ?? {};
  const outcomeKinds = Object.keys(outcomeBetConfigs);
  const allKinds = [...outcomeKinds, ...Object.keys(customGameConfigs)];
  const policyOf = (kind: string) => outcomeBetConfigs[kind]?.riskPolicy ?? customGameConfigs[kind]?.riskPolicy;

  const plugin = extendSchema((build) => {
    const outcomeBetResource = build.input.pgRegistry.pgResources.hub_outcome_bet;
    if (!outcomeBetResource) throw new Error("HubGameConfigPlugin: hub.outcome_bet is missing from the schema (is the `hub` schema migrated?)");
    const outcomeTypes = outcomeKinds.length ? outcomeTypeDefs(outcomeKinds) : "";
    const kindTypes = allKinds.length ? kindTypeDefs(allKinds) : "";
    return {
      // HubBadHashChainError and HubRiskError are always in the schema (game-result-types.ts).
      typeDefs: outcomeTypes || kindTypes ? [gql`${outcomeTypes} ${kindTypes}`] : [],
      objects: {
        ...(outcomeKinds.length ? outcomeBetObjects(outcomeBetResource, outcomeBetConfigs, serverOfBuild(build).chains) : {}),
        ...(allKinds.length ? riskLimitsObjects(policyOf) : {}),
      },
      unions: outcomeKinds.length ? outcomeBetUnions : {},
    } as any;
  }, "HubGameConfigPlugin");
  return withHashChainLength(plugin, options.hashChainLength);
}
