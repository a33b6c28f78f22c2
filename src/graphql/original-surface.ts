import { access, connection, constant, context, EdgeStep, first, inhibitOnNull, lambda, sideEffect } from "grafast";
import { addPgTableCondition, extendSchema, gql } from "graphile-utils";
import type { GraphQLInputType } from "graphql";
import type pg from "pg";
import type { Identity } from "../auth/identity.js";
import { digest } from "../auth/credentials.js";
import { withPgPoolTransaction } from "../db/pools.js";
import { describeValue, ErrorCode } from "../errors.js";
import { clientError } from "./client-error.js";
import { checkAuthInput, defaultJwksUrl, guarded } from "./operator.js";

/**
 * The rest of the original's surface that clients generated against it read:
 * its operator updates, the casino URLs as non-null strings, and its credential
 * fields. Credentials are stored only as digests, so the fields that held them
 * in clear answer a masked value (the nil UUID) instead.
 */
export const MASKED_UUID = "00000000-0000-0000-0000-000000000000";

type Input = Record<string, unknown>;

function operatorActor(identity: Identity | undefined, field: string): string {
  if (identity?.kind !== "operator") {
    throw clientError(
      identity ? ErrorCode.FORBIDDEN : ErrorCode.UNAUTHENTICATED,
      `Unauthorized: ${field} needs an operator API key (Authorization: apikey:<key>).`,
    );
  }
  return `api_key:${identity.apiKeyId}`;
}

/** A mutation's plan: the async work on the superuser pool, once, with the caller's identity. */
function effect(fn: (input: Input, identity: Identity | undefined, pool: pg.Pool) => Promise<unknown>) {
  return (_parent: unknown, fieldArgs: any) =>
    sideEffect([fieldArgs.getRaw("input"), context().get("identity"), context().get("superuserPool")], ([input, identity, pool]) =>
      guarded(() => fn((input ?? {}) as Input, identity as Identity | undefined, pool as pg.Pool)),
    );
}

/**
 * HubCasino.baseUrl and graphqlUrl are non-null in the original. A casino
 * registered without an address (the playground, or one added with a key only)
 * answers the empty string.
 */
export const HubCasinoUrlsPlugin: GraphileConfig.Plugin = {
  name: "HubCasinoUrlsPlugin",
  version: "0.1.0",
  schema: {
    hooks: {
      GraphQLObjectType_fields_field(field, build, context) {
        if (context.Self.name !== "HubCasino") return field;
        const column = context.scope.fieldName === "baseUrl" ? "base_url" : context.scope.fieldName === "graphqlUrl" ? "graphql_url" : null;
        if (!column) return field;
        const { GraphQLNonNull, GraphQLString } = build.graphql;
        return {
          ...field,
          type: new GraphQLNonNull(GraphQLString),
          plan: ($casino: any) => lambda($casino.get(column), (url) => (url as string | null) ?? "", true),
        };
      },
    },
  },
};

/** The id of the live API key with this key, or null; only an operator may ask. */
async function apiKeyIdByKey(key: unknown, identity: Identity | undefined, pool: pg.Pool): Promise<string | null> {
  if (identity?.kind !== "operator" || typeof key !== "string") return null;
  const { rows } = await pool.query<{ id: string }>("select id from hub.api_key where key_digest = $1", [digest(key.toLowerCase())]);
  return rows[0]?.id ?? null;
}

/** The casino's id when it has a stored controller key and the caller is an operator. */
async function casinoSecretId(casinoId: unknown, identity: Identity | undefined, pool: pg.Pool): Promise<{ id: string } | null> {
  if (identity?.kind !== "operator" || typeof casinoId !== "string") return null;
  const { rows } = await pool.query<{ casino_id: string }>("select casino_id from hub_secret.casino_api_key where casino_id = $1", [casinoId]);
  return rows[0] ? { id: rows[0].casino_id } : null;
}

export const HubMaskedCredentialsPlugin = extendSchema((build) => {
  const { hub_api_key: apiKeyResource, hub_casino: casinoResource } = build.input.pgRegistry.pgResources;
  if (!apiKeyResource || !casinoResource) throw new Error("HubMaskedCredentialsPlugin: hub.api_key or hub.casino is missing from the schema (is the `hub` schema migrated?)");
  const secretOf = ($casinoId: any) =>
    lambda([$casinoId, context().get("identity"), context().get("superuserPool")], ([id, identity, pool]) =>
      casinoSecretId(id, identity as Identity | undefined, pool as pg.Pool),
    );
  const masked = () => constant(MASKED_UUID, false);
  return {
    typeDefs: gql`
      extend type HubApiKey {
        "Masked: keys are stored only as digests, so this is always 00000000-0000-0000-0000-000000000000."
        key: UUID!
      }
      extend type HubSession {
        "Masked: session keys are stored only as digests, so this is always 00000000-0000-0000-0000-000000000000."
        key: UUID!
        "Masked: the casino's user token is not kept, so this is always 00000000-0000-0000-0000-000000000000."
        userToken: UUID!
      }
      "That the hub holds a controller key for the casino (operators only); the key itself is never returned."
      type HubCasinoSecret {
        "The casino's id."
        id: UUID!
        "Masked: always 00000000-0000-0000-0000-000000000000."
        apiKey: UUID!
        "Masked: always 00000000-0000-0000-0000-000000000000 (the hub keeps no controller id)."
        controllerId: UUID!
        hubCasinoById: HubCasino
      }
      extend type HubCasino {
        "Null unless the caller is an operator and the hub holds a controller key for the casino."
        hubCasinoSecretById: HubCasinoSecret
      }
      extend type Query {
        "The API key with this key, found through its digest (operators only; null for anyone else and for unknown keys)."
        hubApiKeyByKey(key: UUID!): HubApiKey
        "The casino whose id this is, when it has a stored controller key (operators only)."
        hubCasinoSecretById(id: UUID!): HubCasinoSecret
      }
    `,
    objects: {
      HubApiKey: { plans: { key: masked } },
      HubSession: { plans: { key: masked, userToken: masked } },
      HubCasinoSecret: {
        plans: {
          id: ($s: any) => access($s, "id"),
          apiKey: masked,
          controllerId: masked,
          hubCasinoById: ($s: any) => casinoResource.get({ id: access($s, "id") }),
        },
      },
      HubCasino: { plans: { hubCasinoSecretById: ($c: any) => secretOf($c.get("id")) } },
      Query: {
        plans: {
          hubApiKeyByKey(_: unknown, fieldArgs: any) {
            const $id = lambda([fieldArgs.getRaw("key"), context().get("identity"), context().get("superuserPool")], ([key, identity, pool]) =>
              apiKeyIdByKey(key, identity as Identity | undefined, pool as pg.Pool),
            );
            return apiKeyResource.get({ id: inhibitOnNull($id) });
          },
          hubCasinoSecretById: (_: unknown, fieldArgs: any) => secretOf(fieldArgs.getRaw("id")),
        },
      },
    },
  };
}, "HubMaskedCredentialsPlugin");

const STATISTICS = ["bets", "wagered", "expectedValue"] as const;
const COLUMNS: Record<string, string> = { id: "id", casinoId: "casino_id", currencyKey: "currency_key", bets: "bets", wagered: "wagered", expectedValue: "expected_value" };

/** A bankroll amount to set: a whole number of base units from 0 to 2^53 - 1. */
function bankrollAmount(value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > Number.MAX_SAFE_INTEGER) {
    throw clientError(
      ErrorCode.INVALID_AMOUNT,
      `hubBankrollPatch.amount must be a whole number of base units from 0 to 9007199254740991; received ${describeValue(value)}.`,
    );
  }
  return value;
}

interface BankrollRow {
  id: string;
  casino_id: string;
  currency_key: string;
  amount: number;
  bets: string;
  wagered: number;
  expected_value: number;
}

/**
 * Sets a house bankroll's amount through the ledger: the difference is one
 * adjust_bankroll entry with the operator and the reason. Every other field is
 * kept by the ledger and the bets themselves, so a patch may only repeat it.
 */
async function updateBankroll(input: Input, identity: Identity | undefined, pool: pg.Pool): Promise<{ bankrollId: string; clientMutationId: unknown }> {
  const actor = operatorActor(identity, "updateHubBankrollById");
  const patch = (input.hubBankrollPatch ?? {}) as Record<string, unknown>;
  const reason = input.reason == null ? "updateHubBankrollById" : String(input.reason);
  if (reason.length < 1 || reason.length > 500) {
    throw clientError(ErrorCode.BAD_USER_INPUT, `reason must be 1 to 500 characters; received one of ${reason.length}.`);
  }
  return withPgPoolTransaction(pool, async (client) => {
    const { rows } = await client.query<BankrollRow>(
      "select id, casino_id, currency_key, amount, bets::text as bets, wagered, expected_value from hub.bankroll where id = $1 for update",
      [String(input.id)],
    );
    const row = rows[0];
    if (!row) throw clientError(ErrorCode.BANKROLL_NOT_FOUND, `No house bankroll has the id ${describeValue(input.id)}.`);
    for (const [field, column] of Object.entries(COLUMNS)) {
      const value = patch[field];
      if (value === undefined) continue;
      const current = (row as unknown as Record<string, unknown>)[column];
      const same = (STATISTICS as readonly string[]).includes(field) ? String(value) === String(current) : value === current;
      if (!same) {
        throw clientError(
          ErrorCode.READ_ONLY_FIELD,
          `hubBankrollPatch.${field} cannot be changed (received ${describeValue(value)}, the bankroll has ${describeValue(current)}): only amount may be set, and it is recorded in the ledger.`,
        );
      }
    }
    if (patch.amount !== undefined) {
      const delta = bankrollAmount(patch.amount) - row.amount;
      if (delta !== 0) {
        await client.query("select hub_hidden.adjust_bankroll($1, $2, $3, $4, $5)", [row.casino_id, row.currency_key, delta, actor, reason]);
      }
    }
    return { bankrollId: row.id, clientMutationId: input.clientMutationId ?? null };
  });
}

function casinoName(value: unknown): string {
  if (typeof value !== "string" || value.length < 1 || value.length > 200) {
    throw clientError(ErrorCode.BAD_USER_INPUT, `hubCasinoPatch.name must be a string of 1 to 200 characters; received ${describeValue(value)}.`);
  }
  return value;
}

/**
 * Renames a casino or changes its addresses. A casino whose token keys came
 * from <baseUrl>/.well-known/jwks.json follows its new base URL.
 */
async function updateCasino(input: Input, identity: Identity | undefined, pool: pg.Pool): Promise<{ casinoId: string; clientMutationId: unknown }> {
  operatorActor(identity, "updateHubCasinoById");
  const patch = (input.hubCasinoPatch ?? {}) as { name?: unknown; baseUrl?: string | null; graphqlUrl?: string | null };
  await checkAuthInput({ baseUrl: patch.baseUrl ?? null, graphqlUrl: patch.graphqlUrl ?? null });
  const id = String(input.id);
  return withPgPoolTransaction(pool, async (client) => {
    const { rows } = await client.query<{ base_url: string | null; name: string; is_playground: boolean }>(
      "select base_url, name, is_playground from hub.casino where id = $1 for update",
      [id],
    );
    if (!rows[0]) throw clientError(ErrorCode.UNKNOWN_CASINO, `No casino has the id ${describeValue(input.id)}.`);
    // Playground sessions find their casino by its name.
    if (rows[0].is_playground && patch.name !== undefined && patch.name !== rows[0].name) {
      throw clientError(ErrorCode.BAD_USER_INPUT, `hubCasinoPatch.name: the playground casino keeps its name ${describeValue(rows[0].name)}; received ${describeValue(patch.name)}.`);
    }
    const previousBase = rows[0].base_url;
    const sets: string[] = [];
    const values: unknown[] = [id];
    const set = (column: string, value: unknown) => {
      values.push(value);
      sets.push(`${column} = $${values.length}`);
    };
    if (patch.name !== undefined) set("name", casinoName(patch.name));
    if (patch.baseUrl !== undefined) set("base_url", patch.baseUrl);
    if (patch.graphqlUrl !== undefined) set("graphql_url", patch.graphqlUrl);
    if (sets.length > 0) await client.query(`update hub.casino set ${sets.join(", ")} where id = $1`, values);
    if (patch.baseUrl !== undefined && previousBase && patch.baseUrl !== previousBase) {
      const next = patch.baseUrl ? defaultJwksUrl(patch.baseUrl) : null;
      await client.query(
        "update hub_secret.casino_auth set jwks_url = $2, updated_at = now() where casino_id = $1 and jwks_url = $3 and $2::text is not null",
        [id, next, defaultJwksUrl(previousBase)],
      );
    }
    return { casinoId: id, clientMutationId: input.clientMutationId ?? null };
  });
}

export const HubOperatorUpdatesPlugin = extendSchema((build) => {
  const { hub_bankroll: bankrollResource, hub_casino: casinoResource } = build.input.pgRegistry.pgResources;
  if (!bankrollResource || !casinoResource) throw new Error("HubOperatorUpdatesPlugin: hub.bankroll or hub.casino is missing from the schema (is the `hub` schema migrated?)");
  const edge = (resource: any, key: string) => ($p: any, fieldArgs: any) => {
    const $select = resource.find({ id: access($p, key) });
    fieldArgs.apply($select, "orderBy");
    const $connection = connection($select);
    return new EdgeStep($connection as any, first($connection as any));
  };
  return {
    typeDefs: gql`
      "Only amount may differ from the bankroll's current values: it is set through the ledger (one entry for the difference). The other fields are kept by the ledger and the bets."
      input HubBankrollPatch {
        "Whole base units from 0 to 9007199254740991."
        amount: Float
        bets: BigInt
        casinoId: UUID
        currencyKey: String
        expectedValue: Float
        id: UUID
        wagered: Float
      }
      input UpdateHubBankrollByIdInput {
        clientMutationId: String
        hubBankrollPatch: HubBankrollPatch!
        id: UUID!
        "Recorded in the ledger with the change (default: updateHubBankrollById)."
        reason: String
      }
      type UpdateHubBankrollPayload {
        clientMutationId: String
        hubBankroll: HubBankroll
        hubBankrollEdge(orderBy: [HubBankrollOrderBy!]! = [PRIMARY_KEY_ASC]): HubBankrollEdge
        query: Query
      }
      input HubCasinoPatch {
        baseUrl: String
        graphqlUrl: String
        name: String
      }
      input UpdateHubCasinoByIdInput {
        clientMutationId: String
        hubCasinoPatch: HubCasinoPatch!
        id: UUID!
      }
      type UpdateHubCasinoPayload {
        clientMutationId: String
        hubCasino: HubCasino
        hubCasinoEdge(orderBy: [HubCasinoOrderBy!]! = [PRIMARY_KEY_ASC]): HubCasinoEdge
        query: Query
      }
      extend type HubAddCasinoPayload {
        casino: HubCasino
        query: Query
      }
      extend type Mutation {
        "Set a house bankroll's amount through the ledger (operators only)."
        updateHubBankrollById(input: UpdateHubBankrollByIdInput!): UpdateHubBankrollPayload
        "Rename a casino or change its addresses (operators only)."
        updateHubCasinoById(input: UpdateHubCasinoByIdInput!): UpdateHubCasinoPayload
      }
    `,
    objects: {
      Mutation: {
        plans: {
          updateHubBankrollById: effect(updateBankroll),
          updateHubCasinoById: effect(updateCasino),
        },
      },
      UpdateHubBankrollPayload: {
        plans: {
          clientMutationId: ($p: any) => access($p, "clientMutationId"),
          hubBankroll: ($p: any) => bankrollResource.get({ id: access($p, "bankrollId") }),
          hubBankrollEdge: edge(bankrollResource, "bankrollId"),
          query: () => constant(true, false),
        },
      },
      UpdateHubCasinoPayload: {
        plans: {
          clientMutationId: ($p: any) => access($p, "clientMutationId"),
          hubCasino: ($p: any) => casinoResource.get({ id: access($p, "casinoId") }),
          hubCasinoEdge: edge(casinoResource, "casinoId"),
          query: () => constant(true, false),
        },
      },
      HubAddCasinoPayload: {
        plans: {
          casino: ($p: any) => casinoResource.get({ id: access($p, "casinoId") }),
          query: () => constant(true, false),
        },
      },
    },
  };
}, "HubOperatorUpdatesPlugin");

/**
 * PostGraphile registers an (empty, since GraphQL may not update the tables)
 * patch type per table; the names of the two the hub defines itself move aside.
 */
export const HubPatchNamesPlugin: GraphileConfig.Plugin = {
  name: "HubPatchNamesPlugin",
  version: "0.1.0",
  inflection: {
    replace: {
      patchType(previous, _options, typeName) {
        const name = previous!(typeName);
        return name === "HubBankrollPatch" || name === "HubCasinoPatch" ? `${name}OfTable` : name;
      },
    },
  },
};

/**
 * `condition: { key }` on API keys and sessions, as the original has it: the
 * given key's digest is compared with the stored digest (the key itself is
 * not stored). A null key matches nothing, as no stored key is null.
 */
function keyCondition(tableName: string, lookup: string, description: string): GraphileConfig.Plugin {
  const plugin = addPgTableCondition(
    { schemaName: "hub", tableName },
    "key",
    (build) => ({ type: build.getTypeByName("UUID") as GraphQLInputType, description }),
    (value, { sql, sqlTableAlias }) =>
      value == null
        ? sql`false`
        : sql`${sqlTableAlias}.id = hub_hidden.${sql.identifier(lookup)}(${sql.value(String(value))})`,
  );
  return { ...plugin, name: `${plugin.name}_${tableName}_key` };
}

export const HubApiKeyKeyConditionPlugin = keyCondition("api_key", "api_key_id_by_key", "The API key with this key, compared through its digest.");
export const HubSessionKeyConditionPlugin = keyCondition("session", "session_id_by_key", "The session with this key, compared through its digest.");

export const originalSurfacePlugins: GraphileConfig.Plugin[] = [HubApiKeyKeyConditionPlugin, HubSessionKeyConditionPlugin, HubPatchNamesPlugin, HubCasinoUrlsPlugin, HubMaskedCredentialsPlugin, HubOperatorUpdatesPlugin];
