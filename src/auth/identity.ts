import type { IncomingMessage } from "node:http";
import type { DbSession, DbUser } from "../db/types.js";

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
  /**
   * The playground client id this session was created from, unsealed with the
   * request's own session key; null for sessions made otherwise. A credential
   * of the player (it logs in as them): never log or store it.
   */
  clientId: string | null;
}

export interface OperatorIdentity {
  kind: "operator";
  apiKey: string;
  apiKeyId: string;
}

/**
 * Whom an identity's limits are counted against, for HTTP requests in
 * progress and open WebSockets alike: the player (all its sessions together)
 * or the API key. Undefined for anonymous requests, which are not counted.
 */
export function identityKey(identity: Identity | undefined): string | undefined {
  if (identity?.kind === "user") return `user:${identity.session.user_id}`;
  if (identity?.kind === "operator") return `apikey:${identity.apiKeyId}`;
  return undefined;
}

/** The row behind an identity: its session's id or its API key's id. */
export function credentialIdOf(identity: Identity): string {
  return identity.kind === "user" ? identity.session.id : identity.apiKeyId;
}

/** When the credential behind an identity expires, in ms since the epoch (API keys do not). */
export function expiresAtOf(identity: Pick<UserIdentity, "kind" | "session"> | Pick<OperatorIdentity, "kind"> | undefined): number {
  return identity?.kind === "user" ? identity.session.expired_at.getTime() : Infinity;
}

/**
 * A request that carries the identity: the raw Node request, which is also
 * Express's `req` (as `req.identity`) and what grafserv hands to the GraphQL
 * context. Only the auth hook writes it (setIdentity); everything downstream
 * reads it with identityOf.
 */
export interface WithIdentity {
  identity?: Identity | undefined;
}

/** Leave the identity on the request, for Express (`req.identity`) and GraphQL (identityOf) alike. */
export function setIdentity(req: IncomingMessage, identity: Identity | undefined): void {
  (req as IncomingMessage & WithIdentity).identity = identity;
}

/** The identity the auth hook left on this request, or undefined (anonymous, or a bad credential). */
export function identityOf(req: IncomingMessage | undefined): Identity | undefined {
  return (req as (IncomingMessage & WithIdentity) | undefined)?.identity;
}

/**
 * The contract between this server and the row-level security policies of the
 * core migrations: the role every GraphQL request switches to, and the
 * transaction settings that say who is asking. The SQL side reads them with
 * `current_setting(name, true)`:
 *
 * - `session.user_id`, `session.casino_id`, `session.experience_id`,
 *   `session.id`: hub_hidden.current_user_id(), current_casino_id(),
 *   current_experience_id() and current_session_id();
 * - `operator.api_key`: hub_hidden.is_operator() (set to the key's id).
 *
 * Renaming one here means renaming it in those functions too.
 */
export const GRAPHQL_ROLE = "app_postgraphile";
export const PG_SETTING = {
  role: "role",
  statementTimeout: "statement_timeout",
  sessionId: "session.id",
  userId: "session.user_id",
  casinoId: "session.casino_id",
  experienceId: "session.experience_id",
  operatorApiKey: "operator.api_key",
} as const;

/**
 * Transaction settings for one GraphQL request: switch to app_postgraphile and
 * tell the RLS policies who is asking (hub_hidden.current_user_id() & co.).
 *
 * Built once per credential and frozen: every GraphQL request asks, and the
 * pipelined adaptor keeps its serialised form per settings object. The
 * resolver hands each request a fresh identity object (so no request can
 * alter what another sees), so the cache is not keyed by that object: an
 * identity the resolver made carries, out of sight, the cached credential it
 * was made from (sameCredential), and the settings, made from nothing else,
 * are kept per credential. An identity made by hand is its own key.
 */
export function pgSettingsFor(identity: Identity | undefined, statementTimeoutMs = 0): Readonly<Record<string, string>> {
  const key = (identity as { [CREDENTIAL]?: object } | undefined)?.[CREDENTIAL] ?? identity ?? NO_IDENTITY;
  const cached = settingsByCredential.get(key);
  if (cached !== undefined && cached.timeoutMs === statementTimeoutMs) return cached.settings;
  const settings = Object.freeze(buildPgSettings(identity, statementTimeoutMs));
  settingsByCredential.set(key, { timeoutMs: statementTimeoutMs, settings });
  return settings;
}

const CREDENTIAL = Symbol("hub.identityCredential");

/**
 * Mark `identity` as made from `credential`, an object the resolver keeps
 * for as long as it caches that credential: identities of one credential
 * then share their transaction settings. Not enumerable, so an identity
 * still compares, copies and serialises as the plain object it is.
 */
export function sameCredential<T extends Identity>(identity: T, credential: object): T {
  Object.defineProperty(identity, CREDENTIAL, { value: credential });
  return identity;
}

/** What `sameCredential` marked `identity` as made from; undefined for an identity made by hand. */
export function credentialBehind(identity: Identity): object | undefined {
  return (identity as { [CREDENTIAL]?: object })[CREDENTIAL];
}

/** The key anonymous requests share in the cache below. */
const NO_IDENTITY = {};
const settingsByCredential = new WeakMap<object, { timeoutMs: number; settings: Readonly<Record<string, string>> }>();

function buildPgSettings(identity: Identity | undefined, statementTimeoutMs: number): Record<string, string> {
  const settings: Record<string, string> = { [PG_SETTING.role]: GRAPHQL_ROLE };
  if (statementTimeoutMs > 0) settings[PG_SETTING.statementTimeout] = String(statementTimeoutMs);
  if (identity?.kind === "user") {
    settings[PG_SETTING.sessionId] = identity.session.id;
    settings[PG_SETTING.userId] = identity.session.user_id;
    settings[PG_SETTING.casinoId] = identity.session.casino_id;
    settings[PG_SETTING.experienceId] = identity.session.experience_id;
  } else if (identity?.kind === "operator") {
    // The key's id, not the key: settings are visible in pg_stat_activity and logs.
    settings[PG_SETTING.operatorApiKey] = identity.apiKeyId;
  }
  return settings;
}
