import { createHash, createHmac, randomUUID, timingSafeEqual } from "node:crypto";
import type pg from "pg";
import type { DbCasino, DbExperience, DbUser } from "../db/types.js";
import { argumentOutOfRange, invalidArgument } from "../errors.js";
import { queryFile } from "../db/query-files.js";

const CREATE_SESSION = queryFile("create-session");

/**
 * Credentials (session tokens, API keys) are opaque random strings shown once.
 * The database keeps only their SHA-256 digest, so a leaked dump or
 * log grants nothing. A digest is enough here (no salt, no slow hash): the
 * input has 122 random bits, so there is nothing to brute-force.
 */

/**
 * A random UUID (version 4: 122 random bits), the form existing game
 * clients expect of a session key (its GraphQL type is UUID). Credentials
 * issued before as 43 base64url characters still work: only their digest
 * is looked up, whatever their form.
 */
export function newToken(): string {
  return randomUUID();
}

/** SHA-256 of the credential as sent; the 32-byte value stored in the bytea columns. */
export function digest(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/**
 * A playground client id sealed with the session key it was used to obtain:
 * the id's 16 bytes XOR the first 16 bytes of HMAC-SHA256(key: the session
 * key as sent, message: CLIENT_ID_SEAL_LABEL). The session keeps the sealed
 * copy (hub.session.user_client_id_sealed) so that its player can read the id
 * back, while the database holds the id in no readable form: the session key
 * is stored only as its SHA-256, which says nothing about this HMAC, and each
 * session key is random and seals one id only, so the pad is never reused.
 */
const CLIENT_ID_SEAL_LABEL = "hub:user-client-id";

function clientIdPad(sessionKey: string): Buffer {
  return createHmac("sha256", Buffer.from(sessionKey, "utf8")).update(CLIENT_ID_SEAL_LABEL, "utf8").digest().subarray(0, 16);
}

function xor16(a: Buffer, b: Buffer): Buffer {
  const out = Buffer.allocUnsafe(16);
  for (let i = 0; i < 16; i++) out[i] = a[i]! ^ b[i]!;
  return out;
}

/** The client id (a UUID in canonical form: lower case, with hyphens) sealed with the session key: 16 bytes. */
export function sealClientId(clientId: string, sessionKey: string): Buffer {
  const bytes = Buffer.from(clientId.replace(/-/g, ""), "hex");
  if (bytes.length !== 16) throw new TypeError("sealClientId: the client id must be a UUID");
  return xor16(bytes, clientIdPad(sessionKey));
}

/**
 * The client id back from its sealed copy and the session key, in canonical
 * form, or null when it does not hash to `expectedDigest` (the player's
 * client_id_digest): a copy sealed for another player, another key or
 * altered in the database yields nothing rather than a wrong id.
 */
export function unsealClientId(sealed: Buffer, sessionKey: string, expectedDigest: Buffer | null): string | null {
  if (sealed.length !== 16 || !expectedDigest || expectedDigest.length !== 32) return null;
  const hex = xor16(sealed, clientIdPad(sessionKey)).toString("hex");
  const id = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  return timingSafeEqual(digest(id), expectedDigest) ? id : null;
}

/** The default casino of development: created by the core baseline with is_playground = true. */
export const PLAYGROUND_CASINO = "playground";
export const DEFAULT_EXPERIENCE = "default";

/** The columns of DbUser: never the playground client id's digest. */
export const USER_COLUMNS = "id, casino_id, uname, created_at";

/** Any pg.Pool, pg.Client or pg.PoolClient: each statement here stands alone. */
type Queryable = Pick<pg.Pool, "query">;

/** Insert a new operator API key; the key is returned here and never again. */
export async function createApiKey(pool: Queryable): Promise<{ key: string; id: string }> {
  const key = newToken();
  const { rows } = await pool.query<{ id: string }>("insert into hub.api_key (key_digest) values ($1) returning id", [digest(key)]);
  return { key, id: rows[0]!.id };
}

export interface CreateSessionInput {
  userId: string;
  casinoId: string;
  experienceId: string;
  /** Lifetime from now; the table's default (30 days) when omitted. Fractions allowed. */
  expiresInSeconds?: number | undefined;
  /**
   * The playground client id (canonical UUID) the session is created from:
   * kept on the session only sealed with the new key (sealClientId), so that
   * requests with that key, and no one else, can read it back.
   */
  userClientId?: string | undefined;
}

/**
 * Insert a new session; the token is returned here and never again. The user,
 * the casino and the experience must belong together (the user's and the
 * experience's casino is casinoId): the foreign keys alone would accept a
 * session mixing two casinos, which the row-level security then mis-scopes.
 */
export async function createSession(pool: Queryable, input: CreateSessionInput): Promise<{ token: string; sessionId: string; expiredAt: Date }> {
  const { expiresInSeconds } = input;
  if (expiresInSeconds !== undefined && (typeof expiresInSeconds !== "number" || !Number.isFinite(expiresInSeconds) || expiresInSeconds <= 0)) {
    throw argumentOutOfRange(`createSession: expiresInSeconds must be a positive number of seconds, received ${String(expiresInSeconds)}`);
  }
  const token = newToken();
  const { rows } = await pool.query<{ id: string; expired_at: Date }>(
    CREATE_SESSION,
    [input.userId, input.casinoId, input.experienceId, digest(token), expiresInSeconds ?? null, input.userClientId === undefined ? null : sealClientId(input.userClientId, token)],
  );
  const row = rows[0];
  if (!row) {
    throw invalidArgument(
      `createSession: no user ${input.userId} with experience ${input.experienceId} in casino ${input.casinoId}; ` +
        "the user and the experience must exist and both belong to that casino",
    );
  }
  return { token, sessionId: row.id, expiredAt: row.expired_at };
}

/**
 * Select the row, inserting it first when missing. `on conflict do nothing`
 * followed by a select is safe under concurrency: when another transaction
 * inserted the same key, the insert waits for it to commit, and the select
 * that follows (a new snapshot under read committed) sees its row. Unlike
 * `on conflict do update`, an existing row is neither locked nor rewritten.
 */
async function getOrCreate<T extends pg.QueryResultRow>(
  pool: Queryable,
  selectSql: string,
  insertSql: string,
  params: unknown[],
  what: string,
): Promise<T> {
  const found = await pool.query<T>(selectSql, params);
  if (found.rows[0]) return found.rows[0];
  const inserted = await pool.query<T>(insertSql, params);
  if (inserted.rows[0]) return inserted.rows[0];
  const raced = await pool.query<T>(selectSql, params);
  if (raced.rows[0]) return raced.rows[0];
  throw new Error(`ensurePlayer: ${what} was neither found nor created`);
}

export interface EnsurePlayerInput {
  uname: string;
  /** Default "playground", the development casino the core baseline creates. */
  casinoName?: string | undefined;
  /** Default "default". */
  experienceName?: string | undefined;
}

/**
 * The casino, user and experience a session needs, creating whichever is
 * missing (a new casino is an ordinary one: not a playground, no base_url).
 * Idempotent and safe to run concurrently for the same names.
 */
export async function ensurePlayer(
  pool: Queryable,
  input: EnsurePlayerInput,
): Promise<{ casino: DbCasino; user: DbUser; experience: DbExperience }> {
  const casinoName = input.casinoName ?? PLAYGROUND_CASINO;
  const experienceName = input.experienceName ?? DEFAULT_EXPERIENCE;
  const casino = await getOrCreate<DbCasino>(
    pool,
    "select * from hub.casino where name = $1",
    "insert into hub.casino (name) values ($1) on conflict (name) do nothing returning *",
    [casinoName],
    `casino ${JSON.stringify(casinoName)}`,
  );
  const { user, experience } = await ensureUserAndExperience(pool, { casinoId: casino.id, uname: input.uname, experienceName });
  return { casino, user, experience };
}

/** The user and experience of a casino known by id, creating whichever is missing. */
export async function ensureUserAndExperience(
  pool: Queryable,
  input: { casinoId: string; uname: string; experienceName: string },
): Promise<{ user: DbUser; experience: DbExperience }> {
  const user = await getOrCreate<DbUser>(
    pool,
    `select ${USER_COLUMNS} from hub.user where casino_id = $1 and uname = $2`,
    `insert into hub.user (casino_id, uname) values ($1, $2) on conflict (casino_id, uname) do nothing returning ${USER_COLUMNS}`,
    [input.casinoId, input.uname],
    `user ${JSON.stringify(input.uname)}`,
  );
  const experience = await ensureExperience(pool, input);
  return { user, experience };
}

/** The experience of a casino known by id, created when missing. */
export function ensureExperience(pool: Queryable, input: { casinoId: string; experienceName: string }): Promise<DbExperience> {
  return getOrCreate<DbExperience>(
    pool,
    "select * from hub.experience where casino_id = $1 and name = $2",
    "insert into hub.experience (casino_id, name) values ($1, $2) on conflict (casino_id, name) do nothing returning *",
    [input.casinoId, input.experienceName],
    `experience ${JSON.stringify(input.experienceName)}`,
  );
}
