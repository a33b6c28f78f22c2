/**
 * `hubBets`: one bet history over every game, a connection over the `Bet`
 * interface (src/graphql/bet-interface.ts), newest first. Read through the
 * GraphQL role with the request's settings, so row-level security decides
 * what a player sees; the statement also scopes a player to their own bets
 * (src/money/bet-history.ts), for game tables without a policy.
 */
import { access, lambda, object } from "grafast";
import { withPgClient, type PgExecutor } from "@dataplan/pg";
import { extendSchema, gql } from "graphile-utils";
import { ErrorCode } from "../errors.js";
import { clientError } from "./client-error.js";
import { betHistoryQuery, type BetTable } from "../money/bet-history.js";
import { hubBetResources } from "./bet-interface.js";

const DEFAULT_FIRST = 100;
const MAX_FIRST = 1000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface HubBetsArgs {
  first: number | null;
  after: string | null;
  kind: string[] | null;
  currency: string | null;
  userId: string | null;
}

/** The arguments as the statement takes them; a client's mistake is a client error. */
function checkedArgs(args: HubBetsArgs, tables: readonly BetTable[]) {
  const first = args.first ?? DEFAULT_FIRST;
  if (!(Number.isInteger(first) && first >= 1 && first <= MAX_FIRST)) {
    throw clientError(ErrorCode.INVALID_LIMIT, `hubBets: first must be a whole number from 1 to ${MAX_FIRST}; received ${first}.`);
  }
  if (args.after != null && !UUID.test(args.after)) {
    throw clientError(ErrorCode.INVALID_CURSOR, `hubBets: after must be the cursor of a bet (an edge's cursor, or pageInfo.endCursor); received ${JSON.stringify(args.after.slice(0, 100))}.`);
  }
  const unknown = (args.kind ?? []).filter((kind) => !tables.some((t) => t.kind === kind));
  if (unknown.length > 0) {
    const known = tables.map((t) => t.kind).sort().join(", ") || "none";
    throw clientError(ErrorCode.UNKNOWN_BET_KIND, `hubBets: no bets of kind ${unknown.map((k) => JSON.stringify(k)).join(", ")}; the kinds are: ${known}.`);
  }
  return { first, filter: { before: args.after?.toLowerCase() ?? null, kinds: args.kind, currency: args.currency, userId: args.userId } };
}

export const HubBetsPlugin = extendSchema((build) => {
  const executor = build.input.pgRegistry.pgExecutors.main as PgExecutor;
  const tables = hubBetResources(build).map((r) => r.table);
  return {
    typeDefs: gql`
      type HubBetsEdge {
        "The bet's id: pass it as after for the bets older than this one."
        cursor: String!
        "The bet's game: the name of its table (tagged @hubBet)."
        kind: String!
        node: Bet!
      }
      type HubBetsPageInfo {
        hasNextPage: Boolean!
        endCursor: String
      }
      type HubBetsConnection {
        edges: [HubBetsEdge!]!
        nodes: [Bet!]!
        pageInfo: HubBetsPageInfo!
      }
      extend type Query {
        """
        Bets of every game (every table tagged @hubBet), newest first. A player: their own, in the
        session's casino and experience; an operator: everyone's, or one player's with userId.
        """
        hubBets(first: Int, after: String, kind: [String!], currency: String, userId: UUID): HubBetsConnection!
      }
    `,
    objects: {
      Query: {
        plans: {
          hubBets(_parent: unknown, fieldArgs: any) {
            const $args = object({
              first: fieldArgs.getRaw("first"),
              after: fieldArgs.getRaw("after"),
              kind: fieldArgs.getRaw("kind"),
              currency: fieldArgs.getRaw("currency"),
              userId: fieldArgs.getRaw("userId"),
            });
            return withPgClient(executor, $args, async (client, args) => {
              const { first, filter } = checkedArgs(args as HubBetsArgs, tables);
              // One more than asked: whether there is a next page.
              const query = betHistoryQuery(tables, "request", { ...filter, limit: first + 1 });
              const { rows } = await client.query<{ kind: string; id: string }>(query);
              return { rows: rows.slice(0, first), hasNextPage: rows.length > first };
            });
          },
        },
      },
      HubBetsConnection: {
        plans: {
          edges: ($conn: any) => access($conn, "rows"),
          nodes: ($conn: any) => access($conn, "rows"),
          pageInfo: ($conn: any) => $conn,
        },
      },
      HubBetsEdge: {
        plans: {
          cursor: ($row: any) => access($row, "id"),
          kind: ($row: any) => access($row, "kind"),
          node: ($row: any) => $row,
        },
      },
      HubBetsPageInfo: {
        plans: {
          hasNextPage: ($conn: any) => access($conn, "hasNextPage"),
          endCursor: ($conn: any) => lambda($conn, (c: any) => (c.rows.at(-1)?.id as string | undefined) ?? null, true),
        },
      },
    },
  };
}, "HubBetsPlugin");
