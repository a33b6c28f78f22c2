import "./helpers/env.js";
import t from "tap";
import { startAndListen, defaultPlugins, type PluginContext, type RunningServer } from "@hubpkg/hub";
import { makeExtendSchemaPlugin, extendSchema, gql as graphql } from "@hubpkg/hub/graphile";
import { GraphQLError } from "@hubpkg/hub/graphql";
import { context, sideEffect, lambda } from "@hubpkg/hub/grafast";
import { superuserPool, withPgPoolTransaction, type DbUser } from "@hubpkg/hub/db";
import { exactlyOneRow, maybeOneRow } from "@hubpkg/hub/db/util";
import { logger } from "@hubpkg/hub/logger";
import { gql } from "./helpers/http.js";
import { makeOperator, makePlayer, withPool } from "./helpers/credentials.js";
import { tmpDir, writeFiles } from "./helpers/tmp.js";
import path from "node:path";

// Plugins written exactly as a user writes them, in a module loaded before the server starts.

/** Resolver style: typeDefs + resolvers(parent, args, context). */
const NotesResolverPlugin = makeExtendSchemaPlugin(() => ({
  typeDefs: graphql`
    type Note { id: Int!, body: String!, author: String }
    type WhoAmI { kind: String, uname: String, casinoId: UUID, sessionId: UUID }
    extend type Query { whoAmI: WhoAmI, noteCount: Int! }
    extend type Mutation {
      addNote(body: String!): Note
      failPolitely: Boolean
      failBadly: Boolean
      addNoteThenFail(body: String!): Boolean
    }
  `,
  resolvers: {
    Query: {
      whoAmI(_parent: unknown, _args: unknown, ctx: PluginContext) {
        const id = ctx.identity;
        if (!id) return { kind: null };
        if (id.kind === "operator") return { kind: "operator" };
        return { kind: "user", uname: id.user.uname, casinoId: id.session.casino_id, sessionId: id.sessionId };
      },
      async noteCount() {
        // superuserPool imported from @hubpkg/hub/db before the server started.
        const row = exactlyOneRow(await superuserPool.query<{ n: number }>("select count(*)::int as n from app.note"));
        return row.n;
      },
    },
    Mutation: {
      async addNote(_parent: unknown, args: { body: string }, ctx: PluginContext) {
        if (ctx.identity?.kind !== "user") return null;
        const identity = ctx.identity;
        return withPgPoolTransaction(ctx.superuserPool, async (pgClient) => {
          const user = maybeOneRow(await pgClient.query<DbUser>("select * from hub.user where id = $1", [identity.session.user_id]));
          const { rows } = await pgClient.query<{ id: number; body: string }>(
            "insert into app.note (body, user_id) values ($1, $2) returning id, body",
            [args.body, identity.session.user_id],
          );
          return { ...rows[0], author: user?.uname ?? null };
        });
      },
      failPolitely() {
        throw new GraphQLError("Wager must be at least 1");
      },
      failBadly() {
        throw new Error("secret internal detail");
      },
      async addNoteThenFail(_parent: unknown, args: { body: string }, ctx: PluginContext) {
        await withPgPoolTransaction(ctx.superuserPool, async (pgClient) => {
          await pgClient.query("insert into app.note (body) values ($1)", [args.body]);
          throw new GraphQLError("rolled back");
        });
        return true;
      },
    },
  },
}));

/** Plan style: context(), sideEffect, and a generated entity by its resource. */
const NotesPlanPlugin = extendSchema((build) => {
  const note = build.input.pgRegistry.pgResources.note2!; // the table is renamed by its @name tag
  return {
    typeDefs: graphql`
      extend type Mutation { addNoteReturningEntity(body: String!): Note2 }
      extend type Query { myUserId: UUID }
    `,
    objects: {
      Mutation: {
        plans: {
          addNoteReturningEntity(_parent, fieldArgs) {
            const $body = fieldArgs.getRaw("body");
            const $identity = context().get("identity");
            const $pool = context().get("superuserPool");
            const $id = sideEffect([$body, $identity, $pool], async ([body, identity, pool]) => {
              if (identity?.kind !== "user") return null;
              const { rows } = await pool.query<{ id: number }>("insert into app.note (body, user_id) values ($1, $2) returning id", [body, identity.session.user_id]);
              return rows[0]!.id;
            });
            return note.get({ id: $id });
          },
        },
      },
      Query: {
        plans: {
          myUserId() {
            return lambda(context().get("identity"), (id) => (id?.kind === "user" ? id.session.user_id : null));
          },
        },
      },
    },
  };
}, "NotesPlanPlugin");

let hub: RunningServer;

t.before(async () => {
  const dataDir = tmpDir(t);
  const migrations = writeFiles(path.join(dataDir, "m"), {
    "001-notes.sql": `
      create schema app;
      grant usage on schema app to app_postgraphile;
      create table app.note (id serial primary key, body text not null, user_id uuid references hub.user(id));
      comment on table app.note is E'@name note2';
      grant select on app.note to app_postgraphile;
    `,
  });
  hub = await startAndListen({
    port: 0,
    logLevel: (process.env.TEST_LOG_LEVEL as "silent") ?? "silent",
    handleSignals: false,
    dataDir,
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: migrations,
    plugins: [...defaultPlugins, NotesResolverPlugin, NotesPlanPlugin],
  });
});
t.teardown(() => hub?.stop());

t.test("context.identity in resolvers and plans: user, operator, none", async (t) => {
  const alice = await makePlayer(hub.superuserDatabaseUrl, "alice");
  const op = await makeOperator(hub.superuserDatabaseUrl);
  const q = "{ whoAmI { kind uname casinoId sessionId } myUserId }";
  t.same((await gql(hub.url, q, {}, alice.header)).body, {
    data: { whoAmI: { kind: "user", uname: "alice", casinoId: alice.casinoId, sessionId: alice.sessionId }, myUserId: alice.userId },
  });
  t.same((await gql(hub.url, q, {}, op.header)).body, { data: { whoAmI: { kind: "operator", uname: null, casinoId: null, sessionId: null }, myUserId: null } });
  t.same((await gql(hub.url, q)).body, { data: { whoAmI: { kind: null, uname: null, casinoId: null, sessionId: null }, myUserId: null } });
});

t.test("resolver style: a transaction on superuserPool returning the plugin's own type", async (t) => {
  const bob = await makePlayer(hub.superuserDatabaseUrl, "bob");
  const res = await gql(hub.url, 'mutation { addNote(body: "hello") { id body author } }', {}, bob.header);
  t.same(res.body.errors, undefined);
  t.match(res.body.data, { addNote: { body: "hello", author: "bob" } });
  t.same((await gql(hub.url, 'mutation { addNote(body: "anon") { id } }')).body, { data: { addNote: null } }, "no identity: null, no error");
});

t.test("plan style: sideEffect then the generated entity looked up by id", async (t) => {
  const carol = await makePlayer(hub.superuserDatabaseUrl, "carol");
  const res = await gql(hub.url, 'mutation { addNoteReturningEntity(body: "planned") { id body userId } }', {}, carol.header);
  t.same(res.body.errors, undefined);
  t.match(res.body.data, { addNoteReturningEntity: { body: "planned", userId: carol.userId } });
});

t.test("withPgPoolTransaction rolls back when fn throws; GraphQLError reaches the client", async (t) => {
  const before = ((await gql(hub.url, "{ noteCount }")).body.data as { noteCount: number }).noteCount;
  const res = await gql(hub.url, 'mutation { addNoteThenFail(body: "never") }');
  t.equal(res.body.errors?.[0]?.message, "rolled back");
  const after = ((await gql(hub.url, "{ noteCount }")).body.data as { noteCount: number }).noteCount;
  t.equal(after, before, "nothing of the failed transaction remains");
  const count = await withPool(hub.superuserDatabaseUrl, (pool) => pool.query("select count(*)::int as n from app.note where body = 'never'"));
  t.equal(count.rows[0].n, 0);
});

t.test("GraphQLError keeps its message; any other error is masked with a reference", async (t) => {
  const polite = await gql(hub.url, "mutation { failPolitely }");
  t.equal(polite.status, 200);
  t.equal(polite.body.errors?.[0]?.message, "Wager must be at least 1");
  const bad = await gql(hub.url, "mutation { failBadly }");
  const message = bad.body.errors?.[0]?.message ?? "";
  t.notMatch(message, /secret internal detail/);
  t.match(message, /^Internal error \(reference [0-9a-f]{12}\)/);
  t.match(bad.body.errors?.[0]?.extensions, { code: "INTERNAL_SERVER_ERROR" });
});

t.test("RLS applies to generated queries per identity", async (t) => {
  const dave = await makePlayer(hub.superuserDatabaseUrl, "dave");
  const op = await makeOperator(hub.superuserDatabaseUrl);
  const mine = await gql(hub.url, "{ allHubUsers { nodes { uname } } hubCurrentUser { uname } hubCurrentCasino { name } hubCurrentExperience { name } hubCurrentSession { id } }", {}, dave.header);
  t.same(mine.body.data, {
    allHubUsers: { nodes: [{ uname: "dave" }] },
    hubCurrentUser: { uname: "dave" },
    hubCurrentCasino: { name: "playground" },
    hubCurrentExperience: { name: "default" },
    hubCurrentSession: { id: dave.sessionId },
  });
  const all = await gql(hub.url, "{ allHubUsers { totalCount } allHubApiKeys { totalCount } }", {}, op.header);
  t.ok(((all.body.data as any).allHubUsers.totalCount as number) >= 4, "an operator sees every user");
  t.ok(((all.body.data as any).allHubApiKeys.totalCount as number) >= 1);
  const anon = await gql(hub.url, "{ allHubUsers { totalCount } allHubApiKeys { totalCount } }");
  t.same(anon.body.data, { allHubUsers: { totalCount: 0 }, allHubApiKeys: { totalCount: 0 } });
});

t.test("@hubpkg/hub/logger is the server's logger", async (t) => {
  t.equal(typeof logger.info, "function");
  t.equal(logger.level, "silent", "the running server's level");
});
