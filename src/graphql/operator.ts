import { GraphQLError } from "graphql";
import { extendSchema, gql } from "graphile-utils";
import type { PluginContext } from "./context.js";
import { validatePublicKey } from "../auth/casino-token.js";
import { withPgPoolTransaction } from "../db/pools.js";
import { classifyClientInputError } from "../db/error-class.js";
import { describeValue, ErrorCode } from "../errors.js";
import { clientError } from "./client-error.js";
import * as parse from "../parse.js";
import { apiKeyScope, checkIdempotencyKey, dbClaimIdempotencyKey, dbRecordIdempotentResult } from "../money/idempotency.js";

/**
 * Operator-only mutations (an `apikey:` identity): set up casinos, currencies
 * and experiences, and move money. Every balance and bankroll change goes
 * through the ledger functions, so hub.ledger records who, what and why.
 */
function requireOperator(context: PluginContext): string {
  if (context.identity?.kind !== "operator") {
    // No credential is UNAUTHENTICATED; a player's session is an identity of the wrong kind.
    throw clientError(
      context.identity ? ErrorCode.FORBIDDEN : ErrorCode.UNAUTHENTICATED,
      "Unauthorized: this mutation needs an operator API key (Authorization: apikey:<key>).",
    );
  }
  return `api_key:${context.identity.apiKeyId}`;
}

/**
 * The ledger functions refuse an amount that is not whole base units too;
 * this says so before any SQL, with a code clients can test.
 */
function wholeAmount(amount: number): number {
  const parsed = parse.amount(amount);
  if ("expected" in parsed) {
    throw clientError(
      ErrorCode.INVALID_AMOUNT,
      `amount must be ${parsed.expected}; received ${amount}. Amounts are whole base units of the currency (display_unit_scale base units make one display unit).`,
    );
  }
  return parsed.value;
}

/**
 * Postgres errors a caller can act on become GraphQL errors that say what was
 * wrong, with the same codes as everywhere else (src/db/error-class.ts); the
 * ledger's own messages are kept whole, amounts included: an operator may see them.
 */
function explainPgError(error: unknown): never {
  const known = classifyClientInputError(error);
  if (!known) throw error;
  const e = error as { message?: string };
  const message = known.sqlstate === "P0001" ? String(e.message) : known.message;
  throw clientError(known.code, message, { sqlstate: known.sqlstate, ...(known.constraint ? { constraint: known.constraint } : {}) });
}

export async function guarded<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (error instanceof GraphQLError) throw error;
    return explainPgError(error);
  }
}

interface CasinoAuthInput {
  baseUrl?: string | null;
  graphqlUrl?: string | null;
  jwtPublicKey?: string | null;
  jwksUrl?: string | null;
  jwtIssuer?: string | null;
  jwtAudience?: string | null;
}

export async function checkAuthInput(input: CasinoAuthInput): Promise<void> {
  if (input.jwtPublicKey) {
    try {
      await validatePublicKey(input.jwtPublicKey);
    } catch (error) {
      throw clientError(ErrorCode.BAD_USER_INPUT, `jwtPublicKey is not usable: ${(error as Error).message}.`);
    }
  }
  for (const field of ["baseUrl", "jwksUrl", "graphqlUrl"] as const) {
    const value = input[field];
    if (value === undefined || value === null) continue;
    const parsed = parse.httpUrl(value);
    if ("expected" in parsed) {
      throw clientError(ErrorCode.BAD_USER_INPUT, `${field} must be ${parsed.expected}; received ${describeValue(value)}.`);
    }
  }
}

const operatorTypeDefs = gql`
  input HubAddCasinoInput {
    name: String!
    "The casino's address. Without jwtPublicKey or jwksUrl, its tokens are verified with the keys at <baseUrl>/.well-known/jwks.json."
    baseUrl: String
    "The casino's GraphQL endpoint (http or https)."
    graphqlUrl: String
    "The controller's API key at the casino's GraphQL endpoint. Stored where no GraphQL request can read it; never returned."
    apiKey: String
    "The casino's public key for its user tokens: PEM (BEGIN PUBLIC KEY) or a JWK as JSON."
    jwtPublicKey: String
    "Or a JWKS URL serving its keys."
    jwksUrl: String
    "When set, user tokens must carry this iss."
    jwtIssuer: String
    "When set, user tokens must carry this aud."
    jwtAudience: String
  }
  input HubSetCasinoAuthInput {
    casinoId: UUID!
    jwtPublicKey: String
    jwksUrl: String
    jwtIssuer: String
    jwtAudience: String
  }
  input HubAddCurrencyInput {
    casinoId: UUID!
    key: String!
    displayUnitName: String!
    displayUnitScale: Int!
  }
  input HubAddExperienceInput {
    casinoId: UUID!
    name: String!
  }
  input HubBalanceChangeInput {
    userId: UUID!
    experienceId: UUID!
    currencyKey: String!
    "Whole base units of the currency, from 1 to 9007199254740991."
    amount: Float!
    reason: String!
    "Optional, 1 to 255 characters, the API key's for 24 hours: a retry with the same key and input answers the first change and moves nothing."
    idempotencyKey: String
  }
  input HubBankrollChangeInput {
    casinoId: UUID!
    currencyKey: String!
    "Whole base units of the currency, from 1 to 9007199254740991."
    amount: Float!
    reason: String!
    "Optional, 1 to 255 characters, the API key's for 24 hours: a retry with the same key and input answers the first change and moves nothing."
    idempotencyKey: String
  }
  type HubAddCasinoPayload {
    casinoId: UUID!
  }
  type HubAddCurrencyPayload {
    casinoId: UUID!
    key: String!
  }
  type HubAddExperiencePayload {
    experienceId: UUID!
  }
  type HubBalancePayload {
    balanceId: UUID!
    "The amount after the change."
    amount: Float!
  }
  type HubBankrollPayload {
    bankrollId: UUID!
    amount: Float!
  }
  extend type Mutation {
    hubAddCasino(input: HubAddCasinoInput!): HubAddCasinoPayload!
    hubSetCasinoAuth(input: HubSetCasinoAuthInput!): HubAddCasinoPayload!
    hubAddCurrency(input: HubAddCurrencyInput!): HubAddCurrencyPayload!
    hubAddExperience(input: HubAddExperienceInput!): HubAddExperiencePayload!
    hubCreditBalance(input: HubBalanceChangeInput!): HubBalancePayload!
    hubDebitBalance(input: HubBalanceChangeInput!): HubBalancePayload!
    hubCreditBankroll(input: HubBankrollChangeInput!): HubBankrollPayload!
    hubDebitBankroll(input: HubBankrollChangeInput!): HubBankrollPayload!
  }
`;

/** Casinos, their token keys, currencies and experiences. */
const setupResolvers = {
  async hubAddCasino(_p: unknown, { input }: { input: { name: string; apiKey?: string | null } & CasinoAuthInput }, context: PluginContext) {
    requireOperator(context);
    await checkAuthInput(input);
    const apiKey = input.apiKey ?? null;
    // The key itself is never echoed in the message: it is a credential.
    if (apiKey !== null && (apiKey.length < 1 || apiKey.length > 1000)) {
      throw clientError(ErrorCode.BAD_USER_INPUT, `apiKey must be a string of 1 to 1000 characters; received one of ${apiKey.length}.`);
    }
    return guarded(() =>
      withPgPoolTransaction(context.superuserPool, async (client) => {
        const { rows } = await client.query<{ id: string }>("insert into hub.casino (name, base_url, graphql_url) values ($1, $2, $3) returning id", [
          input.name,
          input.baseUrl ?? null,
          input.graphqlUrl ?? null,
        ]);
        const casinoId = rows[0]!.id;
        if (input.jwtPublicKey || input.jwksUrl) await upsertAuth(client, casinoId, input);
        else if (input.baseUrl) await upsertAuth(client, casinoId, { ...input, jwksUrl: defaultJwksUrl(input.baseUrl) });
        if (apiKey !== null) await client.query("insert into hub_secret.casino_api_key (casino_id, api_key) values ($1, $2)", [casinoId, apiKey]);
        return { casinoId };
      }),
    );
  },
  async hubSetCasinoAuth(_p: unknown, { input }: { input: { casinoId: string } & CasinoAuthInput }, context: PluginContext) {
    requireOperator(context);
    if (!input.jwtPublicKey && !input.jwksUrl) {
      throw clientError(ErrorCode.BAD_USER_INPUT, "Give jwtPublicKey or jwksUrl.");
    }
    await checkAuthInput(input);
    return guarded(async () => {
      await upsertAuth(context.superuserPool, input.casinoId, input);
      return { casinoId: input.casinoId };
    });
  },
  async hubAddCurrency(_p: unknown, { input }: { input: { casinoId: string; key: string; displayUnitName: string; displayUnitScale: number } }, context: PluginContext) {
    requireOperator(context);
    return guarded(async () => {
      await context.superuserPool.query(
        "insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale) values ($1, $2, $3, $4)",
        [input.key, input.casinoId, input.displayUnitName, input.displayUnitScale],
      );
      return { casinoId: input.casinoId, key: input.key };
    });
  },
  async hubAddExperience(_p: unknown, { input }: { input: { casinoId: string; name: string } }, context: PluginContext) {
    requireOperator(context);
    return guarded(async () => {
      const { rows } = await context.superuserPool.query<{ id: string }>("insert into hub.experience (casino_id, name) values ($1, $2) returning id", [input.casinoId, input.name]);
      return { experienceId: rows[0]!.id };
    });
  },
};

export const HubOperatorPlugin = extendSchema(
  () => ({
    typeDefs: operatorTypeDefs,
    resolvers: {
      Mutation: {
        ...setupResolvers,
        hubCreditBalance: (_p: unknown, { input }: { input: BalanceInput }, context: PluginContext) => keyed("hubCreditBalance", input, context, (db) => changeBalance("credit", input, context, db)),
        hubDebitBalance: (_p: unknown, { input }: { input: BalanceInput }, context: PluginContext) => keyed("hubDebitBalance", input, context, (db) => changeBalance("debit", input, context, db)),
        hubCreditBankroll: (_p: unknown, { input }: { input: BankrollInput }, context: PluginContext) => keyed("hubCreditBankroll", input, context, (db) => changeBankroll(1, input, context, db)),
        hubDebitBankroll: (_p: unknown, { input }: { input: BankrollInput }, context: PluginContext) => keyed("hubDebitBankroll", input, context, (db) => changeBankroll(-1, input, context, db)),
      },
    },
  }),
  "HubOperatorPlugin",
);

interface BalanceInput {
  userId: string;
  experienceId: string;
  currencyKey: string;
  amount: number;
  reason: string;
  idempotencyKey?: string | null;
}
interface BankrollInput {
  casinoId: string;
  currencyKey: string;
  amount: number;
  reason: string;
  idempotencyKey?: string | null;
}

type Db = Pick<import("pg").Pool, "query">;

/**
 * An operator's change of a balance or bankroll under its idempotency key
 * (scoped to the API key): without one, the change's one statement on the
 * pool; with one, a transaction that claims the key first and stores the
 * answer, so a retry answers the first change and moves nothing.
 */
async function keyed<T extends { balanceId?: string; bankrollId?: string }>(
  operation: string,
  input: { idempotencyKey?: string | null },
  context: PluginContext,
  change: (db: Db) => Promise<T>,
): Promise<T> {
  requireOperator(context);
  const { idempotencyKey, ...request } = input;
  if (checkIdempotencyKey(idempotencyKey, operation) === undefined) return change(context.superuserPool);
  const scope = apiKeyScope((context.identity as { apiKeyId: string }).apiKeyId);
  const claim = { userId: "", scope, idempotencyKey, operation, request };
  return guarded(() =>
    withPgPoolTransaction(context.superuserPool, async (client) => {
      const replay = await dbClaimIdempotencyKey(client, claim);
      if (replay) return replay.result as T;
      const answer = await change(client);
      await dbRecordIdempotentResult(client, { ...claim, resultId: answer.balanceId ?? answer.bankrollId ?? null, result: answer });
      return answer;
    }),
  );
}

/** Where a casino added with only its base URL publishes its token keys. */
export function defaultJwksUrl(baseUrl: string): string {
  return `${baseUrl.replace(/\/+$/, "")}/.well-known/jwks.json`;
}

async function upsertAuth(client: Pick<import("pg").Pool, "query">, casinoId: string, input: CasinoAuthInput): Promise<void> {
  await client.query(
    `insert into hub_secret.casino_auth (casino_id, public_key, jwks_url, issuer, audience)
     values ($1, $2, $3, $4, $5)
     on conflict (casino_id) do update
        set public_key = excluded.public_key, jwks_url = excluded.jwks_url,
            issuer = excluded.issuer, audience = excluded.audience, updated_at = now()`,
    [casinoId, input.jwtPublicKey ?? null, input.jwksUrl ?? null, input.jwtIssuer ?? null, input.jwtAudience ?? null],
  );
}

async function changeBalance(kind: "credit" | "debit", input: BalanceInput, context: PluginContext, db: Db) {
  const actor = requireOperator(context);
  const amount = wholeAmount(input.amount);
  return guarded(async () => {
    const { rows } = await db.query<{ id: string; amount: number }>(
      `select b.id, b.amount from hub.user u,
              lateral hub_hidden.${kind}_balance(u.id, u.casino_id, $2, $3, $4, $5, $6) b
        where u.id = $1`,
      [input.userId, input.experienceId, input.currencyKey, amount, actor, input.reason],
    );
    const row = rows[0];
    if (!row) throw clientError(ErrorCode.BAD_USER_INPUT, `No user has the id ${input.userId}.`);
    return { balanceId: row.id, amount: row.amount };
  });
}

async function changeBankroll(sign: 1 | -1, input: BankrollInput, context: PluginContext, db: Db) {
  const actor = requireOperator(context);
  const amount = wholeAmount(input.amount);
  return guarded(async () => {
    const { rows } = await db.query<{ id: string; amount: number }>(
      "select id, amount from hub_hidden.adjust_bankroll($1, $2, $3, $4, $5)",
      [input.casinoId, input.currencyKey, sign * amount, actor, input.reason],
    );
    return { bankrollId: rows[0]!.id, amount: rows[0]!.amount };
  });
}
