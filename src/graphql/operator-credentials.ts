import { extendSchema, gql } from "graphile-utils";
import type { PluginContext } from "./context.js";
import { createApiKey } from "../auth/credentials.js";
import { serverOf } from "../server-state.js";
import { ErrorCode } from "../errors.js";
import { clientError } from "./client-error.js";

/**
 * Credentials an operator manages without a shell: revoke a player's session,
 * create and revoke API keys (what `hub session revoke` and `hub api-key …`
 * do on the command line). A revocation is refused at once on this process
 * and, through the credential notification the update sends, on every other.
 */
function requireOperator(context: PluginContext): void {
  if (context.identity?.kind !== "operator") {
    throw clientError(
      context.identity ? ErrorCode.FORBIDDEN : ErrorCode.UNAUTHENTICATED,
      "Unauthorized: this mutation needs an operator API key (Authorization: apikey:<key>).",
    );
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const HubOperatorCredentialsPlugin = extendSchema(
  () => ({
    typeDefs: gql`
      input HubRevokeSessionInput {
        sessionId: UUID!
      }
      input HubRevokeApiKeyInput {
        apiKeyId: UUID!
      }
      type HubRevokePayload {
        "The id of the session or API key."
        id: UUID!
        "When it was revoked: now, or earlier when it already was (then nothing changed)."
        revokedAt: Datetime!
        "False when it was already revoked."
        changed: Boolean!
      }
      type HubCreateApiKeyPayload {
        apiKeyId: UUID!
        "The key, shown this once: the hub keeps only its digest. Send it as Authorization: apikey:<key>."
        apiKey: String!
      }
      extend type Mutation {
        "Revoke a player's session (operator only): the player's next request with it is refused."
        hubRevokeSession(input: HubRevokeSessionInput!): HubRevokePayload!
        "A new operator API key (operator only)."
        hubCreateApiKey: HubCreateApiKeyPayload!
        "Revoke an API key (operator only), the caller's own included."
        hubRevokeApiKey(input: HubRevokeApiKeyInput!): HubRevokePayload!
      }
    `,
    resolvers: {
      Mutation: {
        async hubRevokeSession(_p: unknown, { input }: { input: { sessionId: string } }, context: PluginContext) {
          requireOperator(context);
          const result = await revoke(context, "hub.session", "session", input.sessionId);
          serverOf(context).resolver?.forgetSession(input.sessionId);
          return result;
        },
        async hubCreateApiKey(_p: unknown, _args: unknown, context: PluginContext) {
          requireOperator(context);
          const { key, id } = await createApiKey(context.superuserPool);
          return { apiKeyId: id, apiKey: key };
        },
        async hubRevokeApiKey(_p: unknown, { input }: { input: { apiKeyId: string } }, context: PluginContext) {
          requireOperator(context);
          return revoke(context, "hub.api_key", "API key", input.apiKeyId);
        },
      },
    },
  }),
  "HubOperatorCredentialsPlugin",
);

async function revoke(context: PluginContext, table: "hub.session" | "hub.api_key", what: string, id: string) {
  if (!UUID.test(id)) throw clientError(ErrorCode.BAD_USER_INPUT, `The ${what} id must be a UUID; received ${JSON.stringify(id)}.`);
  const { rows } = await context.superuserPool.query<{ revoked_at: Date; changed: boolean }>(
    `with updated as (update ${table} set revoked_at = now() where id = $1 and revoked_at is null returning revoked_at)
     select revoked_at, true as changed from updated
     union all
     select revoked_at, false from ${table} where id = $1 and revoked_at is not null and not exists (select 1 from updated)`,
    [id],
  );
  const row = rows[0];
  if (!row) throw clientError(ErrorCode.BAD_USER_INPUT, `No ${what} has the id ${id}.`);
  return { id, revokedAt: row.revoked_at.toISOString(), changed: row.changed };
}
