import "./helpers/env.js";
import t from "tap";
import { defaultPlugins } from "@hubpkg/hub";
import { startTestServer } from "@hubpkg/hub/test";
import { makeExtendSchemaPlugin, extendSchema, gql } from "@hubpkg/hub/graphile";
import { sideEffect } from "@hubpkg/hub/grafast";

// Mistakes graphile-utils lets through, which stop the start (issue 47, point 1).

const logLevel = (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent";

/** The start's error, or undefined when it started (and is stopped again). */
async function startError(plugin: GraphileConfig.Plugin, options: { lenientSchema?: boolean } = {}) {
  try {
    const server = await startTestServer({ logLevel, plugins: [...defaultPlugins, plugin], ...options });
    return { server };
  } catch (error) {
    return { error: error as Error & { code?: string } };
  }
}

const TypoPlugin = makeExtendSchemaPlugin(
  () => ({
    typeDefs: gql`
      extend type Mutation {
        playLimbo(target: Integer!): Boolean
      }
    `,
    resolvers: { Mutation: { playLimbo: () => true } },
  }),
  "LimboTypoPlugin",
);

t.test("a typo in typeDefs (Integer!) stops the start naming plugin, type and field", async (t) => {
  const { error, server } = await startError(TypoPlugin);
  await server?.stop();
  t.equal(error?.code, "HUB_PLUGIN_FAILED");
  t.match(error?.message, /^Plugin LimboTypoPlugin \(made at .*plugin-mistakes\.test\.ts:\d+:\d+\): its typeDefs use the type Integer \(in Mutation\.playLimbo\(target:\)\)/);
});

t.test("lenientSchema: true keeps graphile's lenient mode (the field is left out)", async (t) => {
  const { error, server } = await startError(TypoPlugin, { lenientSchema: true });
  t.teardown(() => server?.stop());
  t.equal(error, undefined);
  // What the lenient mode costs: graphile drops the whole Mutation type the typo is in, not just the field.
  const res = await server!.graphqlClient.request<{ __type: { fields: { name: string }[] } | null }>('{ __type(name: "Mutation") { fields { name } } }');
  t.notOk(res.__type?.fields.some((f) => f.name === "playLimbo"));
});

t.test("a resolver for a field the typeDefs do not declare stops the start", async (t) => {
  const plugin = makeExtendSchemaPlugin(() => ({
    typeDefs: gql`
      extend type Mutation {
        playLimbo2(target: Int!): Boolean
      }
    `,
    resolvers: { Mutation: { playLimbo: () => true, playLimbo2: () => true } },
  }));
  const { error, server } = await startError(plugin);
  await server?.stop();
  t.equal(error?.code, "HUB_PLUGIN_FAILED");
  t.match(error?.message, new RegExp(`^Plugin ${plugin.name} \\(made at .*plugin-mistakes\\.test\\.ts:\\d+:\\d+\\): resolvers\\.Mutation\\.playLimbo is given, but its typeDefs declare no field Mutation\\.playLimbo \\(Mutation fields there: playLimbo2\\)`));
});

t.test("a mutation declared without a resolver or plan stops the start", async (t) => {
  const plugin = extendSchema(
    () => ({
      typeDefs: gql`
        extend type Mutation {
          playDice(target: Int!): Boolean
          playLimbo(target: Int!): Boolean
        }
      `,
      objects: { Mutation: { plans: { playDice: () => sideEffect([], () => true) } } },
    }),
    "HalfDonePlugin",
  );
  const { error, server } = await startError(plugin);
  await server?.stop();
  t.equal(error?.code, "HUB_PLUGIN_FAILED");
  t.match(error?.message, /^Plugin HalfDonePlugin \(made at [^)]+\): its typeDefs declare the mutation Mutation\.playLimbo with no resolver or plan/);
  t.notMatch(error?.message, /playDice/, "the implemented mutation is not named");
});

t.test("a plugin without mistakes starts and answers", async (t) => {
  const plugin = makeExtendSchemaPlugin(() => ({
    typeDefs: gql`
      type Echo { text: String! }
      extend type Query { echo(text: String!): Echo }
      extend type Mutation { ping: Boolean }
    `,
    resolvers: { Query: { echo: (_: unknown, args: { text: string }) => ({ text: args.text }) }, Mutation: { ping: () => true } },
  }));
  const { error, server } = await startError(plugin);
  t.teardown(() => server?.stop());
  t.equal(error, undefined);
  t.same(await server!.graphqlClient.request('mutation { ping }'), { ping: true });
});
