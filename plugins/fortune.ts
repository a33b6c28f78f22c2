/**
 * FortunePlugin: the resolver-style reference plugin. It
 * declares its own `Fortune` type, so it reads and writes app.fortune (hidden
 * from the generated API by `@behavior -*`) through superuserPool.
 */
import { makeExtendSchemaPlugin, gql } from "@hubpkg/hub/graphile";
import { clientError, ErrorCode } from "@hubpkg/hub/graphql";
import type { PluginContext } from "@hubpkg/hub";

/** The same limit as the table's check constraint (plugins/migrations/001-fortune.sql). */
export const MAX_FORTUNE_LENGTH = 280;

interface Fortune {
  id: number;
  text: string;
}

function describeText(text: string, length: number): string {
  if (length === 0) return "an empty string";
  if (text.trim() === "") return `only whitespace (${length} characters)`;
  if (text.includes("\u0000")) return "a NUL character (U+0000), which Postgres text cannot store";
  return `${length} characters`;
}

/**
 * Refuse what the table would refuse, with a message the player can act on,
 * instead of letting Postgres fail (which the hub masks as an internal error).
 */
function validateFortuneText(text: string): void {
  // Postgres's length() counts characters, not UTF-16 units: count code points too.
  const length = [...text].length;
  if (length === 0 || length > MAX_FORTUNE_LENGTH || text.trim() === "" || text.includes("\u0000")) {
    throw clientError(
      ErrorCode.BAD_USER_INPUT,
      `addFortune: text must be 1 to ${MAX_FORTUNE_LENGTH} characters, not only whitespace and without NUL characters; received ${describeText(text, length)}.`,
    );
  }
}

export const FortunePlugin = makeExtendSchemaPlugin(
  () => ({
    typeDefs: gql`
      "A fortune-cookie message."
      type Fortune {
        id: Int!
        text: String!
      }
      extend type Query {
        "One stored fortune, each equally likely; null when there is none."
        randomFortune: Fortune
      }
      extend type Mutation {
        "Store a new fortune (1 to 280 characters) under the next sequential id, and return it."
        addFortune(text: String!): Fortune
      }
    `,
    resolvers: {
      Query: {
        async randomFortune(_parent: unknown, _args: unknown, context: PluginContext): Promise<Fortune | null> {
          // order by random() reads every row, which is right for a handful of
          // fortunes; it stays uniform whatever the ids are (gaps included).
          const { rows } = await context.superuserPool.query<Fortune>("select id, text from app.fortune order by random() limit 1");
          return rows[0] ?? null;
        },
      },
      Mutation: {
        async addFortune(_parent: unknown, args: { text: string }, context: PluginContext): Promise<Fortune | null> {
          validateFortuneText(args.text);
          // The id comes from the identity column's sequence: concurrent calls
          // never share one, and validating first means no insert fails and
          // leaves a gap.
          const { rows } = await context.superuserPool.query<Fortune>(
            "insert into app.fortune (text) values ($1) returning id, text",
            [args.text],
          );
          return rows[0] ?? null;
        },
      },
    },
  }),
  "FortunePlugin",
);
