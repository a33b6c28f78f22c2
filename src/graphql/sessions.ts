import { GraphQLError } from "graphql";
import { extendSchema, gql } from "graphile-utils";
import type { PluginContext } from "../context.js";
import { createSession, ensureUserAndExperience, PLAYGROUND_CASINO, DEFAULT_EXPERIENCE } from "../credentials.js";
import { CasinoTokenError, verifyCasinoToken } from "../casino-token.js";
import { withPgPoolTransaction } from "../db/pools.js";
import type { DbCasino, DbExperience, DbUser } from "../db/types.js";

/** The starting balance of a new playground player, in HOUSE. */
export const PLAYGROUND_STARTING_BALANCE = 1000;
/** What a new playground house bankroll holds, so wins can be paid. */
export const PLAYGROUND_BANKROLL = 1_000_000;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function sessionPayload(token: string, user: DbUser, experience: DbExperience) {
  return {
    sessionToken: token,
    user: { id: user.id, uname: user.uname, casinoId: user.casino_id },
    experience: { id: experience.id, name: experience.name, casinoId: experience.casino_id },
  };
}

const sessionTypes = gql`
  "A new session. The token is shown once: send it as Authorization: session:<token>."
  type HubSessionPayload {
    sessionToken: String!
    user: HubSessionUser!
    experience: HubSessionExperience!
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

/** hubAuthenticate (casino token exchange) and hubLogout. */
export const HubSessionPlugin = extendSchema(
  () => ({
    typeDefs: [
      sessionTypes,
      gql`
        input HubAuthenticateInput {
          casinoId: UUID!
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
          hubAuthenticate(input: HubAuthenticateInput!): HubSessionPayload!
          "Revoke the session in the Authorization header."
          hubLogout: HubLogoutPayload!
        }
      `,
    ],
    resolvers: {
      Mutation: {
        async hubAuthenticate(_parent: unknown, args: { input: { casinoId: string; userToken: string } }, context: PluginContext) {
          const { casinoId, userToken } = args.input;
          const pool = context.superuserPool;
          let player;
          try {
            player = await verifyCasinoToken(pool, casinoId, userToken);
          } catch (error) {
            if (error instanceof CasinoTokenError) throw new GraphQLError(error.message, { extensions: { code: error.code } });
            throw error;
          }
          // Only a verified token creates anything: the user, experience and session together.
          return withPgPoolTransaction(pool, async (client) => {
            const { user, experience } = await ensureUserAndExperience(client, { casinoId, uname: player.uname, experienceName: player.experienceName });
            const { token } = await createSession(client, { userId: user.id, casinoId, experienceId: experience.id });
            return sessionPayload(token, user, experience);
          });
        },
        async hubLogout(_parent: unknown, _args: unknown, context: PluginContext) {
          if (context.identity?.kind !== "user") return { success: false, sessionId: null };
          const { rowCount } = await context.superuserPool.query(
            "update hub.session set revoked_at = now() where id = $1 and revoked_at is null",
            [context.identity.sessionId],
          );
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
 * the playground is on (README: HUB_PLAYGROUND).
 */
export const HubPlaygroundPlugin = extendSchema(
  () => ({
    typeDefs: gql`
      input HubCreatePlaygroundSessionInput {
        uname: String!
      }
      extend type Mutation {
        "Create (or reuse) a playground player and give it a new session; a new player starts with 1000 HOUSE."
        hubCreatePlaygroundSession(input: HubCreatePlaygroundSessionInput!): HubSessionPayload!
      }
    `,
    resolvers: {
      Mutation: {
        async hubCreatePlaygroundSession(_parent: unknown, args: { input: { uname: string } }, context: PluginContext) {
          const uname = args.input.uname.trim();
          if (uname.length < 1 || uname.length > 200) {
            throw new GraphQLError(`uname must be 1 to 200 characters; received ${uname.length}.`, { extensions: { code: "BAD_USER_INPUT" } });
          }
          return withPgPoolTransaction(context.superuserPool, async (client) => {
            const { rows } = await client.query<DbCasino>("select * from hub.casino where name = $1 and is_playground", [PLAYGROUND_CASINO]);
            const casino = rows[0];
            if (!casino) throw new GraphQLError("The playground casino is missing from the database.");
            const existed = await client.query("select 1 from hub.user where casino_id = $1 and uname = $2", [casino.id, uname]);
            const { user, experience } = await ensureUserAndExperience(client, { casinoId: casino.id, uname, experienceName: DEFAULT_EXPERIENCE });
            if (existed.rowCount === 0) {
              await client.query("select hub_hidden.ensure_bankroll($1, 'HOUSE', $2, 'playground: initial house bankroll')", [casino.id, PLAYGROUND_BANKROLL]);
              await client.query(
                "select hub_hidden.credit_balance($1, $2, $3, 'HOUSE', $4, 'playground', 'playground starting balance')",
                [user.id, casino.id, experience.id, PLAYGROUND_STARTING_BALANCE],
              );
            }
            const { token } = await createSession(client, { userId: user.id, casinoId: casino.id, experienceId: experience.id });
            return sessionPayload(token, user, experience);
          });
        },
      },
    },
  }),
  "HubPlaygroundPlugin",
);

export function isUuid(value: string): boolean {
  return UUID.test(value);
}
