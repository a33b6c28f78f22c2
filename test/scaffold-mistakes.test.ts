/**
 * A user's project (`hub init` from the packed hub, installed in a temporary
 * folder) with mistakes in a game plugin: `npm start` stops naming the
 * plugin's file, the field and the type (issue 47, point 1). And its own
 * game's bets in the one bet history, hubBets and GET /bets (point 2).
 */
import "./helpers/env.js";
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import { graphql, npmStart, packedProject } from "./helpers/packed-project.js";

// npm pack, npm install and several starts, one after the other, on a loaded machine.
t.setTimeout(900_000);

/** A limbo game written as the project's dice game is, with `typeDefs` and resolvers given by the test. */
const limbo = (typeDefs: string, resolvers: string) => `
import { makeExtendSchemaPlugin, gql } from "@hubpkg/hub/graphile";

export const LimboPlugin = makeExtendSchemaPlugin(() => ({
  typeDefs: gql\`
    ${typeDefs}
  \`,
  resolvers: { Mutation: { ${resolvers} } },
}), "LimboPlugin");
`;

/** The project's options with the limbo plugin added to its plugins. */
function addLimbo(dir: string, source: string): void {
  fs.writeFileSync(path.join(dir, "src", "limbo.ts"), source);
  const file = path.join(dir, "src", "options.ts");
  const options = fs.readFileSync(file, "utf8");
  const added = options
    .replace(`import { DicePlugin } from "./dice.js";`, `import { DicePlugin } from "./dice.js";\nimport { LimboPlugin } from "./limbo.js";`)
    .replace("    DicePlugin,\n", "    DicePlugin,\n    LimboPlugin,\n");
  if (!added.includes("LimboPlugin,")) throw new Error(`the scaffold's src/options.ts changed; add LimboPlugin to its plugins:\n${options}`);
  fs.writeFileSync(file, added);
}

t.test("npm start stops on a plugin's mistakes, naming the plugin, the field and the type", async (t) => {
  const dir = await packedProject(t);
  if (!dir) return;
  const pristine = fs.readFileSync(path.join(dir, "src", "options.ts"), "utf8");
  t.teardown(() => fs.writeFileSync(path.join(dir, "src", "options.ts"), pristine));

  await t.test("a typo in typeDefs (Integer! for Int!)", async (t) => {
    addLimbo(dir, limbo("extend type Mutation { playLimbo(target: Integer!): Boolean }", "playLimbo: () => true"));
    const started = await npmStart(dir);
    t.teardown(() => started.stop());
    t.equal(started.url, undefined, `it did not listen:\n${started.output()}`);
    t.not(await started.exited, 0, "npm start failed");
    t.match(started.output(), /HUB_PLUGIN_FAILED/);
    t.match(started.output(), new RegExp(`Plugin LimboPlugin \\(made at ${path.join(dir, "src", "limbo.ts")}:\\d+:\\d+\\): its typeDefs use the type Integer \\(in Mutation\\.playLimbo\\(target:\\)\\)`));
  });

  await t.test("a resolver under another name than the typeDefs' field", async (t) => {
    fs.writeFileSync(path.join(dir, "src", "options.ts"), pristine);
    addLimbo(dir, limbo("extend type Mutation { playLimbo2(target: Int!): Boolean }", "playLimbo: () => true"));
    const started = await npmStart(dir);
    t.teardown(() => started.stop());
    t.equal(started.url, undefined, `it did not listen:\n${started.output()}`);
    t.not(await started.exited, 0, "npm start failed");
    t.match(started.output(), /HUB_PLUGIN_FAILED/);
    t.match(started.output(), /Plugin LimboPlugin \(made at [^)]*limbo\.ts:\d+:\d+\): resolvers\.Mutation\.playLimbo is given, but its typeDefs declare no field Mutation\.playLimbo \(Mutation fields there: playLimbo2\)/);
    t.match(started.output(), /its typeDefs declare the mutation Mutation\.playLimbo2 with no resolver or plan/);
  });

  await t.test("the project's game (dice_bet, tagged @hubBet) is in hubBets and GET /bets without code of its own", async (t) => {
    // The reference routes, as a project adds them: GET /bets among them.
    const file = path.join(dir, "src", "options.ts");
    const withRoutes = pristine
      .replace(`import { DicePlugin } from "./dice.js";`, `import { DicePlugin } from "./dice.js";\nimport { configureReferenceRoutes } from "@hubpkg/hub/plugins";`)
      .replace(`  extraPgSchemas: ["app"],`, `  extraPgSchemas: ["app"],\n  configureApp: configureReferenceRoutes,`);
    t.ok(withRoutes.includes("configureApp: configureReferenceRoutes"), "the routes added to the scaffold's options");
    fs.writeFileSync(file, withRoutes);
    const started = await npmStart(dir);
    t.teardown(() => started.stop());
    t.ok(started.url, `npm start listens:\n${started.output()}`);
    if (!started.url) return;
    const session = await graphql(started.url, 'mutation { hubCreatePlaygroundSession(input: { uname: "alice" }) { sessionToken } }');
    const headers = { authorization: `session:${session.data?.hubCreatePlaygroundSession?.sessionToken}` };
    const rolled = await graphql(started.url, 'mutation { rollDice(input: { wager: 100, currency: "HOUSE", target: 50 }) { bet { id } } }', headers);
    const betId = rolled.data?.rollDice?.bet?.id as string | undefined;
    t.ok(betId, JSON.stringify(rolled));
    const listed = await graphql(started.url, "{ hubBets { edges { kind node { __typename id wager } } } }", headers);
    t.same(listed.errors, undefined);
    t.same(listed.data?.hubBets?.edges, [{ kind: "dice_bet", node: { __typename: "DiceBet", id: betId, wager: 100 } }]);
    const res = await fetch(`${started.url}/bets`, { headers });
    t.equal(res.status, 200);
    t.match(await res.json(), [{ kind: "dice_bet", id: betId, wager: 100, currencyKey: "HOUSE" }]);
  });
});
