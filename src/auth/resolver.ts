import { LRUCache } from "lru-cache";
import type pg from "pg";
import { digest, unsealClientId } from "./credentials.js";
import type { DbUser } from "../db/types.js";
import { describeValue, HubError } from "../errors.js";
import { credentialBehind, credentialIdOf, expiresAtOf, sameCredential, type Identity, type UserIdentity } from "./identity.js";
import * as parse from "../parse.js";
import { createLookupBatches } from "./lookup-batches.js";
import { PoolSaturatedError } from "../db/error-class.js";

/**
 * Authorization header → identity (`session:` or `apikey:`), for the auth hook.
 *
 *   session:<token>  → { kind: "user", user, sessionId, session, clientId }  (unrevoked, unexpired)
 *   apikey:<key>     → { kind: "operator", apiKey, apiKeyId }       (unrevoked)
 *
 * Anything else is unauthenticated (undefined) and costs no database query.
 * A bad credential never throws; a database error does, and the caller
 * decides what a request gets then.
 *
 * Caching. Each answer, a valid identity or "no such credential", is kept in
 * memory for cacheTtlMs, keyed by kind and SHA-256 digest, never by the token
 * itself; the operator identity's apiKey is re-attached from the header at
 * each call, so no raw credential sits in the cache. Likewise a playground
 * session's client id is cached only sealed (as stored) and unsealed at each
 * call with the key the request carries (one HMAC and one SHA-256). Consequences:
 *  - revoking a session or an API key in the database takes effect after at
 *    most cacheTtlMs in this process (call clear() to make it immediate, or
 *    forgetSession() for one session, as hubLogout does);
 *  - a session's expired_at is honoured exactly: a cached session is refused
 *    from the instant it expires, whatever is left of the cache entry;
 *  - a flood of unknown credentials costs at most one query per distinct
 *    credential per TTL. Negative answers live in their own cache, so such a
 *    flood evicts only other negative answers, never valid identities; each
 *    cache holds at most maxEntries (least recently used evicted first).
 * Concurrent lookups of one uncached credential share a single query, and
 * while lookups are in flight the next distinct credentials wait and are read
 * together in one query (src/auth/lookup-batches.ts).
 *
 * `pool` should be the superuser pool: the lookups read token digests, which
 * app_postgraphile cannot see. The resolver only ever calls `pool.query`.
 * last_used_at is not updated here (one write per request would cost more
 * than the lookup); that is batched elsewhere.
 */
export interface IdentityResolver {
  resolve(header: string | undefined): Promise<Identity | undefined>;
  /** Forget every cached answer, e.g. right after revoking a credential. */
  clear(): void;
  /**
   * Forget what is cached for one session, at once: its revocation must not
   * wait for the notification (or the TTL) on the instance that revoked it.
   */
  forgetSession(sessionId: string): void;
  /**
   * Of these identities, the credential ids (credentialIdOf) still valid now,
   * read from the database, never from the cache: for connections that hold
   * an identity longer than one request (WebSockets).
   */
  stillValid(identities: Iterable<Identity>): Promise<Set<string>>;
  /**
   * As stillValid, with when each valid credential expires now (ms since the
   * epoch; Infinity for an API key): an expiry moved earlier or later while a
   * connection is open is what the connection is held to from then on.
   */
  validUntil(identities: Iterable<Identity>): Promise<Map<string, number>>;
}

export interface IdentityResolverOptions {
  /** How long an answer is reused, in ms (default 1000; 0 disables the cache). */
  cacheTtlMs?: number | undefined;
  /** Most cached answers of each kind, valid and invalid (default 10000). */
  maxEntries?: number | undefined;
}

/** What a lookup found, without any raw credential. */
type Found =
  | { kind: "user"; user: DbUser; session: UserIdentity["session"]; clientIdSealed: Buffer | null; clientIdDigest: Buffer | null; digest?: string }
  | { kind: "operator"; apiKeyId: string; digest?: string };

/** What a lookup found, undefined for "no such credential" (wrapped: lru-cache stores no undefined). */
type Entry = { found: Found | undefined };

/**
 * The one rule of a valid credential, for the lookup of a header and the
 * re-check of open WebSockets alike: a session neither revoked nor expired,
 * an API key not revoked (each condition on the table's own columns).
 */
const VALID_SESSION = "s.revoked_at is null and s.expired_at > now()";
const VALID_API_KEY = "k.revoked_at is null";

// Each looks up many digests at once (src/auth/lookup-batches.ts), answering each row's digest.
const SESSION_SQL = `
select s.token_digest as digest, s.id, s.user_id, s.casino_id, s.experience_id, s.expired_at, s.user_client_id_sealed,
       u.id as u_id, u.casino_id as u_casino_id, u.uname as u_uname, u.created_at as u_created_at,
       case when s.user_client_id_sealed is not null then u.client_id_digest end as u_client_id_digest
  from hub.session s
  join hub.user u on u.id = s.user_id
 where s.token_digest = any($1::bytea[]) and ${VALID_SESSION}`;

const API_KEY_SQL = `select k.key_digest as digest, k.id from hub.api_key k where k.key_digest = any($1::bytea[]) and ${VALID_API_KEY}`;

/** Lookup queries in flight at once: the credentials pool has 3 connections, and stamps API key usage too. */
const LOOKUP_CONCURRENCY = 2;
/** The most credentials one lookup query reads. */
const LOOKUP_BATCH = 256;

const STILL_VALID_SQL = `
select s.id, s.expired_at, s.token_digest as digest from hub.session s where s.id = any($1::uuid[]) and ${VALID_SESSION}
union all
select k.id, null, k.key_digest from hub.api_key k where k.id = any($2::uuid[]) and ${VALID_API_KEY}`;

interface SessionRow {
  digest: Buffer;
  id: string;
  user_id: string;
  casino_id: string;
  experience_id: string;
  expired_at: Date;
  user_client_id_sealed: Buffer | null;
  u_id: string;
  u_casino_id: string;
  u_uname: string;
  u_created_at: Date;
  u_client_id_digest: Buffer | null;
}

const resolverOptionInvalid = (option: string, received: unknown, expected: string): HubError =>
  new HubError(
    "HUB_OPTION_INVALID",
    `createIdentityResolver option "${option}" is invalid: received ${describeValue(received)}, expected ${expected}.`,
  );

function checkOptions(options: IdentityResolverOptions): { ttl: number; max: number } {
  const ttl = parse.milliseconds(options.cacheTtlMs ?? 1000);
  if ("expected" in ttl) throw resolverOptionInvalid("cacheTtlMs", options.cacheTtlMs, ttl.expected);
  const max = parse.integerAtLeast(0)(options.maxEntries ?? 10_000);
  if ("expected" in max) throw resolverOptionInvalid("maxEntries", options.maxEntries, max.expected);
  return { ttl: ttl.value, max: max.value };
}

/**
 * Of these identities, when each one still valid expires (Infinity for an API
 * key), read from the database: revoked, expired, deleted, or its row's digest
 * changed since it was resolved (the key no longer names that row): absent.
 */
async function readValidity(pool: pg.Pool, identities: Iterable<Identity>): Promise<Map<string, number>> {
  const sessionIds = new Set<string>();
  const keyIds = new Set<string>();
  // The digest each identity was resolved from; an identity made by hand has none and is judged by its row alone.
  const digests = new Map<string, Set<string>>();
  for (const identity of identities) {
    const id = credentialIdOf(identity);
    (identity.kind === "user" ? sessionIds : keyIds).add(id);
    const digest = (credentialBehind(identity) as Found | undefined)?.digest;
    if (digest !== undefined) digests.set(id, (digests.get(id) ?? new Set()).add(digest));
  }
  if (sessionIds.size === 0 && keyIds.size === 0) return new Map();
  const { rows } = await pool.query<{ id: string; expired_at: Date | null; digest: Buffer }>(STILL_VALID_SQL, [[...sessionIds], [...keyIds]]);
  const valid = new Map<string, number>();
  for (const row of rows) {
    const presented = digests.get(row.id);
    if (presented && (presented.size > 1 || !presented.has(row.digest.toString("hex")))) continue;
    valid.set(row.id, row.expired_at ? row.expired_at.getTime() : Infinity);
  }
  return valid;
}

export function createIdentityResolver(pool: pg.Pool, options: IdentityResolverOptions = {}): IdentityResolver {
  const { ttl, max } = checkOptions(options);
  // Each answer expires ttl after it was stored; no cache at all when either is 0.
  const caching = ttl > 0 && max > 0;
  const valid = caching ? new LRUCache<string, Entry>({ max, ttl }) : undefined;
  const invalid = caching ? new LRUCache<string, Entry>({ max, ttl }) : undefined;
  const inFlight = new Map<string, Promise<Found | undefined>>();
  // Bumped by clear(): a lookup that started before must not refill the cache
  // with what may be a revoked credential.
  let generation = 0;

  async function lookupMany(kind: string, keys: Buffer[]): Promise<Map<string, Found>> {
    const found = new Map<string, Found>();
    if (kind === "apikey") {
      const { rows } = await pool.query<{ digest: Buffer; id: string }>(API_KEY_SQL, [keys]);
      for (const row of rows) found.set(row.digest.toString("hex"), { kind: "operator", apiKeyId: row.id, digest: row.digest.toString("hex") });
      return found;
    }
    const { rows } = await pool.query<SessionRow>(SESSION_SQL, [keys]);
    for (const row of rows) {
      found.set(row.digest.toString("hex"), {
        kind: "user",
        user: { id: row.u_id, casino_id: row.u_casino_id, uname: row.u_uname, created_at: row.u_created_at },
        session: { id: row.id, user_id: row.user_id, casino_id: row.casino_id, experience_id: row.experience_id, expired_at: row.expired_at },
        clientIdSealed: row.user_client_id_sealed,
        clientIdDigest: row.u_client_id_digest,
        digest: row.digest.toString("hex"),
      });
    }
    return found;
  }
  // A lookup waits for a query no longer than a query waits for a connection of the pool.
  const maxWaitMs = pool.options.connectionTimeoutMillis || 10_000;
  const lookup: (kind: parse.CredentialKind, key: Buffer) => Promise<Found | undefined> = createLookupBatches(lookupMany, {
    concurrency: LOOKUP_CONCURRENCY,
    maxBatch: LOOKUP_BATCH,
    maxWaitMs,
    tooLong: () => new PoolSaturatedError("credentials", maxWaitMs, undefined),
  });

  function remember(cacheKey: string, found: Found | undefined): void {
    (found ? valid : invalid)?.set(cacheKey, { found });
  }

  function cached(cacheKey: string): Entry | undefined {
    return valid?.get(cacheKey) ?? invalid?.get(cacheKey);
  }

  /** A fresh object per call, so no caller can alter what another one sees. */
  function toIdentity(found: Found | undefined, credential: string): Identity | undefined {
    if (!found) return undefined;
    if (found.kind === "operator") return sameCredential({ kind: "operator", apiKey: credential, apiKeyId: found.apiKeyId }, found);
    // The database checked expiry when the row was read; the cache may outlive it.
    if (expiresAtOf(found) <= Date.now()) return undefined;
    const clientId = found.clientIdSealed ? unsealClientId(found.clientIdSealed, credential, found.clientIdDigest) : null;
    return sameCredential({ kind: "user", user: { ...found.user }, sessionId: found.session.id, session: { ...found.session }, clientId }, found);
  }

  const resolver: IdentityResolver = {
    async resolve(header) {
      const parsed = parse.parseAuthorization(header);
      if (!parsed) return undefined;
      const key = digest(parsed.credential);
      const cacheKey = `${parsed.kind}:${key.toString("base64")}`;
      const entry = cached(cacheKey);
      if (entry) return toIdentity(entry.found, parsed.credential);

      let pending = inFlight.get(cacheKey);
      if (!pending) {
        const started = generation;
        pending = lookup(parsed.kind, key).then(
          (found) => {
            if (inFlight.get(cacheKey) === pending) inFlight.delete(cacheKey);
            if (started === generation) remember(cacheKey, found);
            return found;
          },
          (error: unknown) => {
            // Not cached: the next request tries the database again.
            if (inFlight.get(cacheKey) === pending) inFlight.delete(cacheKey);
            throw error;
          },
        );
        inFlight.set(cacheKey, pending);
      }
      return toIdentity(await pending, parsed.credential);
    },
    clear() {
      generation++;
      valid?.clear();
      invalid?.clear();
      inFlight.clear();
    },
    async stillValid(identities) {
      return new Set((await resolver.validUntil(identities)).keys());
    },
    validUntil: (identities) => readValidity(pool, identities),
    forgetSession(sessionId) {
      // A lookup already under way may have read the session before it was
      // revoked: it must neither fill the cache nor be joined by new requests.
      generation++;
      inFlight.clear();
      if (!valid) return;
      const stale = [...valid.entries()].filter(([, entry]) => entry.found?.kind === "user" && entry.found.session.id === sessionId);
      for (const [cacheKey] of stale) valid.delete(cacheKey);
    },
  };
  return resolver;
}
