import type { DbSession, DbUser } from "./db/types.js";

/**
 * Who made a request. The same object is `req.identity` in
 * Express handlers and `context.identity` in GraphQL plans and resolvers.
 */
export type Identity = UserIdentity | OperatorIdentity;

export interface UserIdentity {
  kind: "user";
  user: DbUser;
  sessionId: string;
  session: Pick<DbSession, "id" | "user_id" | "casino_id" | "experience_id" | "expired_at">;
}

export interface OperatorIdentity {
  kind: "operator";
  apiKey: string;
  apiKeyId: string;
}

/**
 * Transaction settings for one GraphQL request: switch to app_postgraphile and
 * tell the RLS policies who is asking (hub_hidden.current_user_id() & co.).
 */
export function pgSettingsFor(identity: Identity | undefined, statementTimeoutMs = 0): Record<string, string> {
  const base: Record<string, string> = statementTimeoutMs > 0 ? { role: "app_postgraphile", statement_timeout: String(statementTimeoutMs) } : { role: "app_postgraphile" };
  if (identity?.kind === "user") {
    return {
      ...base,
      "session.id": identity.session.id,
      "session.user_id": identity.session.user_id,
      "session.casino_id": identity.session.casino_id,
      "session.experience_id": identity.session.experience_id,
    };
  }
  if (identity?.kind === "operator") {
    // The key's id, not the key: settings are visible in pg_stat_activity and logs.
    return { ...base, "operator.api_key": identity.apiKeyId };
  }
  return base;
}
