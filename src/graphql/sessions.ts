import { GraphQLError } from "graphql";
import { constant, context, lambda } from "grafast";
import { extendSchema, gql } from "graphile-utils";
import { ADOPT_IDENTITY, type AdoptIdentity, type PluginContext } from "./context.js";
import type { UserIdentity } from "../auth/identity.js";
import { randomBytes } from "node:crypto";
import type pg from "pg";
import { createSession, digest, ensureExperience, ensureUserAndExperience, PLAYGROUND_CASINO, DEFAULT_EXPERIENCE, USER_COLUMNS } from "../auth/credentials.js";
import { describeValue, ErrorCode } from "../errors.js";
import { clientError } from "./client-error.js";
import * as parse from "../parse.js";
import { serverOf } from "../server-state.js";
import { CasinoTokenError, verifyCasinoToken } from "../auth/casino-token.js";
import { withPgPoolTransaction } from "../db/pools.js";
import type { DbCasino, DbExperience, DbUser } from "../db/types.js";

/** The starting balance of a new playground player, in HOUSE. */
export const PLAYGROUND_STARTING_BALANCE = 1000;
/** What a new playground house bankroll holds, so wins can be paid. */
export const PLAYGROUND_BANKROLL = 1_000_000;

type NewSession = { token: string; sessionId: string; expiredAt: Date };

/**
 * The answer to a login, and from now on the request's identity: the
 * payload's `query` (read after this resolver) then shows the new player,
 * as a frontend expects of its login answer (balances, hash chain). The
 * caller holds the new session's key from this answer anyway, so later fields
 * of the same request gain nothing it could not send itself.
 */
function loggedIn(context: PluginContext, session: NewSession, user: DbUser, experience: DbExperience, clientId: string | null) {
  const identity: UserIdentity = {
    kind: "user",
    user,
    sessionId: session.sessionId,
    session: { id: session.sessionId, user_id: user.id, casino_id: user.casino_id, experience_id: experience.id, expired_at: session.expiredAt },
    clientId,
  };
  (context as PluginContext & { [ADOPT_IDENTITY]?: AdoptIdentity })[ADOPT_IDENTITY]?.(context, identity);
  return sessionPayload(session.token, user, experience);
}

function sessionPayload(token: string, user: DbUser, experience: DbExperience) {
  return {
    success: { sessionKey: token, uname: user.uname, experienceId: experience.id, userId: user.id },
    sessionToken: token,
    user: { id: user.id, uname: user.uname, casinoId: user.casino_id },
    experience: { id: experience.id, name: experience.name, casinoId: experience.casino_id },
  };
}

const sessionTypes = gql`
  """
  A new session, in two shapes: the original's (success, query) and this hub's
  (sessionToken, user, experience). The key is shown once: send it as
  Authorization: session:<sessionKey>.
  """
  type HubAuthenticatePayload {
    success: HubAuthenticateSuccess
    "The whole Query, read as the new session's player (hubCurrentUser & co.)."
    query: Query
    "The same value as success.sessionKey."
    sessionToken: String!
    user: HubSessionUser!
    experience: HubSessionExperience!
  }
  type HubAuthenticateSuccess {
    sessionKey: UUID!
    uname: String!
    experienceId: UUID!
    userId: UUID!
  }
  type HubSessionUser {
    id: UUID!
    uname: String!
    casinoId: UUID!
  }
  type HubSessionExperience {
    id: UUID!
    name: String!
    casinoId: UUID!
  }
`;

interface AuthenticateInput {
  casinoBaseUrl?: string | null;
  casinoId?: string | null;
  userToken: string;
}

/** The casino id the input names, by id or by base URL (compared in normalised form on both sides). */
async function casinoOf(pool: Pick<pg.Pool, "query">, input: AuthenticateInput): Promise<string> {
  const byUrl = input.casinoBaseUrl !== undefined && input.casinoBaseUrl !== null;
  const byId = input.casinoId !== undefined && input.casinoId !== null;
  if (byUrl === byId) {
    throw clientError(
      ErrorCode.BAD_USER_INPUT,
      `hubAuthenticate needs exactly one of casinoBaseUrl and casinoId; received ${byUrl ? "both" : "neither"}.`,
    );
  }
  if (byId) return input.casinoId!;
  const wanted = parse.baseUrl(input.casinoBaseUrl);
  if ("expected" in wanted) {
    throw clientError(ErrorCode.BAD_USER_INPUT, `casinoBaseUrl must be ${wanted.expected}; received ${describeValue(input.casinoBaseUrl)}.`);
  }
  // Few casinos, and the stored text may predate normalisation: compare in the one normalised form.
  const { rows } = await pool.query<{ id: string; base_url: string }>("select id, base_url from hub.casino where base_url is not null");
  const matches = rows.filter((row) => {
    const stored = parse.baseUrl(row.base_url);
    return "value" in stored && stored.value === wanted.value;
  });
  if (matches.length === 0) throw clientError(ErrorCode.UNKNOWN_CASINO, `No casino has the base URL ${describeValue(wanted.value)}.`);
  if (matches.length > 1) {
    throw clientError(ErrorCode.BAD_USER_INPUT, `${matches.length} casinos have the base URL ${describeValue(wanted.value)} once normalised; name the casino by casinoId.`);
  }
  return matches[0]!.id;
}

/** hubAuthenticate (casino token exchange) and hubLogout. */
export const HubSessionPlugin = extendSchema(
  () => ({
    typeDefs: [
      sessionTypes,
      gql`
        "Exactly one of casinoBaseUrl and casinoId names the casino."
        input HubAuthenticateInput {
          "The casino's base URL as registered; scheme and host case and trailing slashes do not matter."
          casinoBaseUrl: String
          casinoId: UUID
          "A JWT the casino signed for its player (claims: uname, experience, exp)."
          userToken: String!
        }
        type HubLogoutPayload {
          "True when a session was revoked."
          success: Boolean!
          sessionId: UUID
        }
        extend type Mutation {
          "Exchange a casino-signed user token for a hub session."
          hubAuthenticate(input: HubAuthenticateInput!): HubAuthenticatePayload!
          "Revoke the session in the Authorization header."
          hubLogout: HubLogoutPayload!
        }
      `,
    ],
    plans: {
      // The request has no root value (it would be undefined, hence null):
      // any non-null value stands for it, since Query's fields read only the context.
      HubAuthenticatePayload: { query: () => constant(true, false) },
    },
    resolvers: {
      Mutation: {
        async hubAuthenticate(_parent: unknown, args: { input: AuthenticateInput }, context: PluginContext) {
          const { userToken } = args.input;
          const pool = context.superuserPool;
          const casinoId = await casinoOf(pool, args.input);
          let player;
          try {
            player = await verifyCasinoToken(pool, casinoId, userToken, serverOf(context).casinoKeys);
          } catch (error) {
            if (error instanceof CasinoTokenError) throw new GraphQLError(error.message, { extensions: { ...error.extensions, code: error.code } });
            throw error;
          }
          // Only a verified token creates anything: the user, experience and session together.
          const { session, user, experience } = await withPgPoolTransaction(pool, async (client) => {
            const { user, experience } = await ensureUserAndExperience(client, { casinoId, uname: player.uname, experienceName: player.experienceName });
            const session = await createSession(client, { userId: user.id, casinoId, experienceId: experience.id });
            return { session, user, experience };
          });
          // After the commit: the payload's query reads these rows on other connections.
          return loggedIn(context, session, user, experience, null);
        },
        async hubLogout(_parent: unknown, _args: unknown, context: PluginContext) {
          if (context.identity?.kind !== "user") return { success: false, sessionId: null };
          const { rowCount } = await context.superuserPool.query(
            "update hub.session set revoked_at = now() where id = $1 and revoked_at is null",
            [context.identity.sessionId],
          );
          // Refused by this server from now on; other servers (in this process or
          // another) hear of it through the notification the update's trigger sent.
          serverOf(context).resolver?.forgetSession(context.identity.sessionId);
          return { success: rowCount === 1, sessionId: context.identity.sessionId };
        },
      },
    },
  }),
  "HubSessionPlugin",
);

/**
 * hubCreatePlaygroundSession: a player for development and demos, in the
 * playground casino, with 1 000 HOUSE to play with. Only in the schema when
 * the playground is on (README: Playground).
 *
 * Anyone may call it, so it must never hand out a session for a player the
 * caller has not proved to be. Two forms:
 *  - { userClientId, experienceClientId? }: the client generated the id once
 *    and keeps it; the same id is the same player again, a new id a new
 *    player. The player is found by the id's SHA-256 digest
 *    (hub.user.client_id_digest); the new session keeps the id only sealed
 *    with its own key (hub.session.user_client_id_sealed), so that requests
 *    with that key read it back (HubUser.clientId) and the database holds it
 *    in no readable form: nobody can learn it there and become that player.
 *  - { uname }: always a NEW player with that name; a name already taken in
 *    the playground casino (compared as a reader would: case, white space,
 *    compatibility forms) is refused with UNAME_TAKEN.
 *  - {} or { experienceClientId } (the other revision's forms): always a NEW
 *    player with a generated name, in a new experience or in the one of
 *    experienceClientId. Nobody can log in as that player again.
 */
interface PlaygroundInput {
  userClientId?: string | null;
  experienceClientId?: string | null;
  uname?: string | null;
}

/** Names of the uname form: plain ASCII, so no two distinct names look alike through case or Unicode tricks. */
const PLAYGROUND_UNAME = /^[A-Za-z0-9_.-]{1,50}$/;

const badInput = (message: string) => clientError(ErrorCode.BAD_USER_INPUT, message);

/** The UUID as lower-case hex with hyphens, whatever form the UUID scalar accepted. */
function canonicalUuid(field: string, value: string): string {
  const parsed = parse.uuid(value, { hyphensOptional: true });
  if ("expected" in parsed) throw badInput(`${field} must be a UUID; received ${describeValue(value)}.`);
  if (/^(0{8}-0{4}-0{4}-0{4}-0{12}|f{8}-f{4}-f{4}-f{4}-f{12})$/.test(parsed.value)) {
    throw badInput(`${field} must be a random UUID the client generated and keeps (e.g. crypto.randomUUID()); received the ${parsed.value[0] === "0" ? "nil" : "max"} UUID, which anyone can guess.`);
  }
  return parsed.value;
}

type Form =
  | { kind: "client"; userClientId: string; experienceClientId: string | undefined }
  | { kind: "uname"; uname: string }
  | { kind: "new"; experienceClientId: string | undefined };

function parsePlaygroundInput(input: PlaygroundInput): Form {
  const has = (v: unknown) => v !== undefined && v !== null;
  const given = Object.entries(input).filter(([, v]) => has(v)).map(([k]) => k);
  const expected = "either { userClientId, experienceClientId } (both optional) or { uname }";
  if (has(input.uname)) {
    if (given.length > 1) throw badInput(`hubCreatePlaygroundSession takes ${expected}, not both; received ${given.join(", ")}.`);
    // Trimmed of white space only; anything else must be exactly the name.
    const uname = input.uname!.trim();
    if (!PLAYGROUND_UNAME.test(uname)) {
      throw badInput(
        `uname must be 1 to 50 characters of A-Z, a-z, 0-9, "_", "-" or "."; received ${describeValue(input.uname)}. ` +
          "To come back as the same player later, use userClientId instead.",
      );
    }
    return { kind: "uname", uname };
  }
  const experienceClientId = has(input.experienceClientId) ? canonicalUuid("experienceClientId", input.experienceClientId!) : undefined;
  if (!has(input.userClientId)) return { kind: "new", experienceClientId };
  return {
    kind: "client",
    userClientId: canonicalUuid("userClientId", input.userClientId!),
    experienceClientId,
  };
}

/** A name nobody chose: the client id must not show in it, since others may see names. */
function generatedName(prefix: string): string {
  return `${prefix}-${randomBytes(6).toString("hex")}`;
}

/**
 * Insert with a generated name (the last parameter). No row back means a
 * concurrent request inserted the same client id first, or (1 in 2^48) the
 * name clashed: the caller looks again and, if still absent, draws again.
 */
async function insertNamed<T extends pg.QueryResultRow>(client: pg.PoolClient, sql: string, params: unknown[], prefix: string): Promise<T | undefined> {
  const { rows } = await client.query<T>(sql, [...params, generatedName(prefix)]);
  return rows[0];
}

async function playgroundUserByClientId(client: pg.PoolClient, casinoId: string, clientIdDigest: Buffer): Promise<DbUser> {
  const select = `select ${USER_COLUMNS} from hub.user where casino_id = $1 and client_id_digest = $2`;
  for (let attempt = 0; attempt < 5; attempt++) {
    const found = await client.query<DbUser>(select, [casinoId, clientIdDigest]);
    if (found.rows[0]) return found.rows[0];
    // on conflict do nothing: a concurrent first call with the same id wins, this one then finds its row.
    const inserted = await insertNamed<DbUser>(
      client,
      `insert into hub.user (casino_id, client_id_digest, uname) values ($1, $2, $3) on conflict do nothing returning ${USER_COLUMNS}`,
      [casinoId, clientIdDigest],
      "player",
    );
    if (inserted) return inserted;
  }
  throw new Error("hubCreatePlaygroundSession: the player was neither found nor created after 5 attempts");
}

async function playgroundExperienceByClientId(client: pg.PoolClient, casinoId: string, clientId: string): Promise<DbExperience> {
  const select = "select id, casino_id, name, created_at, client_id from hub.experience where casino_id = $1 and client_id = $2";
  for (let attempt = 0; attempt < 5; attempt++) {
    const found = await client.query<DbExperience>(select, [casinoId, clientId]);
    if (found.rows[0]) return found.rows[0];
    const inserted = await insertNamed<DbExperience>(
      client,
      "insert into hub.experience (casino_id, client_id, name) values ($1, $2, $3) on conflict do nothing returning id, casino_id, name, created_at, client_id",
      [casinoId, clientId],
      "experience",
    );
    if (inserted) return inserted;
  }
  throw new Error("hubCreatePlaygroundSession: the experience was neither found nor created after 5 attempts");
}

/** A player (or experience) nobody can find again: no client id, a generated name. */
async function newPlaygroundRow<T extends pg.QueryResultRow>(client: pg.PoolClient, sql: string, casinoId: string, prefix: string): Promise<T> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const inserted = await insertNamed<T>(client, sql, [casinoId], prefix);
    if (inserted) return inserted;
  }
  throw new Error(`hubCreatePlaygroundSession: no free generated name for a new ${prefix} after 5 attempts`);
}

/** A new player of the uname form; UNAME_TAKEN when a player of the casino already has that name as a reader sees it. */
async function newPlaygroundUserNamed(client: pg.PoolClient, casinoId: string, uname: string): Promise<DbUser> {
  // Two concurrent requests for "Bob" and "bob" must not both pass the check below.
  await client.query("select pg_advisory_xact_lock(hashtextextended('hub:playground-uname:' || $1::text || ':' || hub_hidden.uname_key($2), 0))", [casinoId, uname]);
  const taken = await client.query<{ uname: string }>(
    "select uname from hub.user where casino_id = $1 and hub_hidden.uname_key(uname) = hub_hidden.uname_key($2) limit 1",
    [casinoId, uname],
  );
  const inserted = taken.rows[0]
    ? undefined
    : (await client.query<DbUser>(
        `insert into hub.user (casino_id, uname) values ($1, $2) on conflict do nothing returning ${USER_COLUMNS}`,
        [casinoId, uname],
      )).rows[0];
  if (!inserted) {
    throw clientError(
      ErrorCode.UNAME_TAKEN,
      `The playground name ${describeValue(uname)} is taken${taken.rows[0] && taken.rows[0].uname !== uname ? " (names differing only in case, spacing or character forms are the same name)" : ""}: ` +
        "the uname form only creates new players. Choose another name, or use userClientId to come back as the same player.",
    );
  }
  return inserted;
}

export const HubPlaygroundPlugin = extendSchema(
  () => ({
    typeDefs: gql`
      """
      Exactly one form: { userClientId, experienceClientId } (the same userClientId is the same
      player again; without it, a new player, in a new experience unless experienceClientId
      names one) or { uname } (always a new player; UNAME_TAKEN when the name is taken).
      """
      input HubCreatePlaygroundSessionInput {
        "A random UUID the client generated once (crypto.randomUUID()) and keeps secret: it is the player's only proof of identity."
        userClientId: UUID
        "A UUID that picks (or creates) a playground experience; default: the experience named default with userClientId, a new experience without."
        experienceClientId: UUID
        "Create a NEW player with this name (A-Z, a-z, 0-9, _ - ., at most 50); refused with UNAME_TAKEN when taken."
        uname: String
      }
      extend type Mutation {
        "A session for a playground player: the one of userClientId (created on first use), or a new one named uname. A player new to an experience starts with 1000 HOUSE there."
        hubCreatePlaygroundSession(input: HubCreatePlaygroundSessionInput!): HubAuthenticatePayload!
      }
    `,
    resolvers: {
      Mutation: {
        async hubCreatePlaygroundSession(_parent: unknown, args: { input: PlaygroundInput }, context: PluginContext) {
          const form = parsePlaygroundInput(args.input);
          const { session, user, experience } = await withPgPoolTransaction(context.superuserPool, async (client) => {
            const { rows } = await client.query<DbCasino>("select * from hub.casino where name = $1 and is_playground", [PLAYGROUND_CASINO]);
            const casino = rows[0];
            if (!casino) throw new Error("The playground casino is missing from the database.");
            const user =
              form.kind === "uname" ? await newPlaygroundUserNamed(client, casino.id, form.uname)
              : form.kind === "client" ? await playgroundUserByClientId(client, casino.id, digest(form.userClientId))
              : await newPlaygroundRow<DbUser>(client, `insert into hub.user (casino_id, uname) values ($1, $2) on conflict do nothing returning ${USER_COLUMNS}`, casino.id, "player");
            const experience =
              form.kind !== "uname" && form.experienceClientId !== undefined
                ? await playgroundExperienceByClientId(client, casino.id, form.experienceClientId)
                : form.kind === "new"
                  ? await newPlaygroundRow<DbExperience>(client, "insert into hub.experience (casino_id, name) values ($1, $2) on conflict do nothing returning id, casino_id, name, created_at, client_id", casino.id, "experience")
                  : await ensureExperience(client, { casinoId: casino.id, experienceName: DEFAULT_EXPERIENCE });
            // Serialises concurrent first calls of one player, so the starting balance is credited once.
            await client.query("select 1 from hub.user where id = $1 for update", [user.id]);
            const balance = await client.query(
              "select 1 from hub.balance where user_id = $1 and experience_id = $2 and currency_key = 'HOUSE'",
              [user.id, experience.id],
            );
            if (balance.rowCount === 0) {
              await client.query("select hub_hidden.ensure_bankroll($1, 'HOUSE', $2, 'playground: initial house bankroll')", [casino.id, PLAYGROUND_BANKROLL]);
              await client.query(
                "select hub_hidden.credit_balance($1, $2, $3, 'HOUSE', $4, 'playground', 'playground starting balance')",
                [user.id, casino.id, experience.id, PLAYGROUND_STARTING_BALANCE],
              );
            }
            const session = await createSession(client, {
              userId: user.id,
              casinoId: casino.id,
              experienceId: experience.id,
              userClientId: form.kind === "client" ? form.userClientId : undefined,
            });
            return { session, user, experience };
          });
          // After the commit: the payload's query reads these rows on other connections.
          return loggedIn(context, session, user, experience, form.kind === "client" ? form.userClientId : null);
        },
      },
    },
  }),
  "HubPlaygroundPlugin",
);

/**
 * HubUser.clientId: the playground client id of that user, for the player
 * itself only. The id is a secret of that client (it is how it becomes the
 * player again), and the database holds it only sealed with the key of each
 * session created from it: the identity resolver unseals it with the key the
 * request carries (identity.clientId). So the field shows it on that user's
 * own row, in a session created from the id, and null everywhere else:
 * other users' rows, operators, sessions made otherwise (CLI, test kit,
 * hubAuthenticate) or before the id was kept. No SQL is involved.
 */
export const HubUserClientIdPlugin = extendSchema(
  () => ({
    typeDefs: gql`
      extend type HubUser {
        "The userClientId this playground player's session was created with; only to that session, on the player's own row; null for anyone else and for sessions not created from one."
        clientId: UUID
      }
    `,
    objects: {
      HubUser: {
        plans: {
          clientId: ($user: any) =>
            lambda(
              [$user.get("id"), context().get("identity")],
              ([userId, identity]) => (identity?.kind === "user" && identity.user.id === userId ? identity.clientId : null),
              true,
            ),
        },
      },
    },
  }),
  "HubUserClientIdPlugin",
);
