import "./helpers/env.js";
import t from "tap";
import fs from "node:fs";
import path from "node:path";
import { createHash } from "node:crypto";
import { buildSchema, parse, isObjectType, isInputObjectType, isEnumType, type GraphQLField, type GraphQLSchema, type DefinitionNode } from "graphql";
import { createCurrency, createHouseBankroll, getHouseBankroll, startTestServer, type TestServer } from "@hubpkg/hub/test";
import { gql } from "./helpers/http.js";
import { makeOperator, makePlayer } from "./helpers/credentials.js";
import { ROOT } from "./helpers/process.js";
import { tmpDir } from "./helpers/tmp.js";

/*
 * The rest of the original's surface, over real HTTP on a real database:
 * operator updates, the casino's ids, masked credentials, non-null casino
 * URLs, and the exported SDL against the original's types for each.
 */

let hub: TestServer;
let sdlPath: string;
t.before(async () => {
  sdlPath = path.join(tmpDir(t, "hub-surface-sdl-"), "schema.graphql");
  hub = await startTestServer({ logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent", exportSchemaSDLPath: sdlPath });
});
t.teardown(() => hub?.stop());

type Res = { body: { data?: Record<string, any> | null; errors?: { message: string; extensions?: Record<string, unknown> }[] } };
const codeOf = (res: Res) => res.body.errors?.[0]?.extensions?.code;
const uuidOf = (text: string) => {
  const h = createHash("md5").update(text).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
};

t.test("the exported SDL has the original's types for every item built, field for field", async (t) => {
  const ours = buildSchema(fs.readFileSync(sdlPath, "utf8"));
  const original = parse(fs.readFileSync(path.join(ROOT, "test/fixtures/original-surface-sdl.graphql"), "utf8"));
  let compared = 0;
  for (const def of original.definitions as DefinitionNode[]) {
    if (!("name" in def) || !def.name) continue;
    const name = def.name.value;
    const actual = shapeOf(ours, name);
    if (!t.ok(actual, `${name} exists`) || !actual) continue;
    const expected = expectedShape(def);
    if (def.kind.endsWith("Extension")) {
      for (const [field, type] of Object.entries(expected)) t.equal(actual[field], type, `${name}.${field}`);
    } else {
      t.same(actual, expected, `${name} matches the original`);
    }
    compared++;
  }
  t.equal(compared, original.definitions.length, "every definition of the excerpt was compared");

  function expectedShape(def: DefinitionNode): Record<string, string> {
    const fields = "fields" in def ? (def.fields ?? []) : [];
    const values = "values" in def ? (def.values ?? []) : [];
    if (values.length) return Object.fromEntries(values.map((v) => [v.name.value, v.name.value]));
    return Object.fromEntries(
      fields.map((f) => {
        if (!("arguments" in f)) return [f.name.value, printType(f.type)];
        const args = (f.arguments ?? []).map((a) => `${a.name.value}: ${printType(a.type)}`).join(", ");
        return [f.name.value, `${args} -> ${printType(f.type)}`];
      }),
    );
  }
  function printType(node: any): string {
    if (node.kind === "NonNullType") return `${printType(node.type)}!`;
    if (node.kind === "ListType") return `[${printType(node.type)}]`;
    return node.name.value;
  }
  function shapeOf(schema: GraphQLSchema, name: string): Record<string, string> | undefined {
    const type = schema.getType(name);
    const shape = (f: GraphQLField<unknown, unknown>) => `${f.args.map((a) => `${a.name}: ${String(a.type)}`).join(", ")} -> ${String(f.type)}`;
    if (isObjectType(type)) return Object.fromEntries(Object.values(type.getFields()).map((f) => [f.name, shape(f)]));
    if (isInputObjectType(type)) return Object.fromEntries(Object.values(type.getFields()).map((f) => [f.name, String(f.type)]));
    if (isEnumType(type)) return Object.fromEntries(type.getValues().map((v) => [v.name, v.name]));
    return undefined;
  }
});

const UPDATE_BANKROLL = `mutation($id: UUID!, $patch: HubBankrollPatch!, $reason: String, $cm: String) {
  updateHubBankrollById(input: { id: $id, hubBankrollPatch: $patch, reason: $reason, clientMutationId: $cm }) {
    clientMutationId
    hubBankroll { id amount bets currencyKey }
    hubBankrollEdge { cursor node { id amount } }
    query { __typename }
  }
}`;

t.test("updateHubBankrollById sets the amount through the ledger, operators only; the statistics are not writable", async (t) => {
  const op = await makeOperator(hub.superuserDatabaseUrl);
  const casinoId = hub.playgroundCasinoId;
  await createCurrency(hub.dbPool, { casinoId, key: "UPDT", displayUnitName: "updt", displayUnitScale: 1 });
  const bankroll = await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: "UPDT", amount: 1000 });

  const raised = await gql(hub.url, UPDATE_BANKROLL, { id: bankroll.id, patch: { amount: 5000 }, reason: "top-up for the weekend", cm: "m-1" }, op.header);
  t.equal(raised.body.errors, undefined);
  t.same(raised.body.data?.updateHubBankrollById, {
    clientMutationId: "m-1",
    hubBankroll: { id: bankroll.id, amount: 5000, bets: "0", currencyKey: "UPDT" },
    hubBankrollEdge: { cursor: raised.body.data?.updateHubBankrollById.hubBankrollEdge.cursor, node: { id: bankroll.id, amount: 5000 } },
    query: { __typename: "Query" },
  });
  t.type(raised.body.data?.updateHubBankrollById.hubBankrollEdge.cursor, "string", "the edge has a cursor");

  const lowered = await gql(hub.url, UPDATE_BANKROLL, { id: bankroll.id, patch: { amount: 0, bets: "0", currencyKey: "UPDT" } }, op.header);
  t.equal(lowered.body.errors, undefined, "repeating the current statistics is accepted");
  t.equal(lowered.body.data?.updateHubBankrollById.hubBankroll.amount, 0, "down to 0");

  const { rows } = await hub.dbPool.query<{ amount_delta: number; actor: string; reason: string; balance_after: number }>(
    "select amount_delta, actor, reason, balance_after from hub.ledger where casino_id = $1 and currency_key = 'UPDT' and account = 'house' order by id",
    [casinoId],
  );
  t.same(
    rows.map((r) => [r.amount_delta, r.actor, r.reason, r.balance_after]),
    [
      [1000, rows[0]?.actor, rows[0]?.reason, 1000],
      [4000, `api_key:${op.id}`, "top-up for the weekend", 5000],
      [-5000, `api_key:${op.id}`, "updateHubBankrollById", 0],
    ],
    "each change is one ledger entry for the difference, with the operator and the reason",
  );

  const same = await gql(hub.url, UPDATE_BANKROLL, { id: bankroll.id, patch: { amount: 0 } }, op.header);
  t.equal(same.body.errors, undefined, "setting the current amount changes nothing");
  const count = await hub.dbPool.query("select 1 from hub.ledger where casino_id = $1 and currency_key = 'UPDT'", [casinoId]);
  t.equal(count.rowCount, 3, "and writes no ledger entry");

  const stats = await gql(hub.url, UPDATE_BANKROLL, { id: bankroll.id, patch: { wagered: 10 } }, op.header);
  t.equal(codeOf(stats), "READ_ONLY_FIELD");
  t.match(stats.body.errors?.[0]?.message, /hubBankrollPatch\.wagered cannot be changed \(received 10, the bankroll has 0\)/);
  for (const amount of [1.5, -1, 2 ** 53]) {
    const bad = await gql(hub.url, UPDATE_BANKROLL, { id: bankroll.id, patch: { amount } }, op.header);
    t.equal(codeOf(bad), "INVALID_AMOUNT", `amount ${amount} refused`);
  }
  const unknown = await gql(hub.url, UPDATE_BANKROLL, { id: "0190f3a0-0000-7000-8000-000000000000", patch: { amount: 1 } }, op.header);
  t.equal(codeOf(unknown), "BANKROLL_NOT_FOUND");

  const player = await makePlayer(hub.superuserDatabaseUrl, "bankroll-updater");
  t.equal(codeOf(await gql(hub.url, UPDATE_BANKROLL, { id: bankroll.id, patch: { amount: 9 } }, player.header)), "FORBIDDEN", "a player is refused");
  t.equal(codeOf(await gql(hub.url, UPDATE_BANKROLL, { id: bankroll.id, patch: { amount: 9 } })), "UNAUTHENTICATED", "so is an anonymous request");
  t.equal((await getHouseBankroll(hub.dbPool, { casinoId, currencyKey: "UPDT" }))?.amount, 0, "the bankroll is as the operator left it");
});

const UPDATE_CASINO = `mutation($id: UUID!, $patch: HubCasinoPatch!) {
  updateHubCasinoById(input: { id: $id, hubCasinoPatch: $patch, clientMutationId: "c" }) {
    clientMutationId
    hubCasino { id name baseUrl graphqlUrl }
    hubCasinoEdge { node { id } }
  }
}`;

t.test("hubAddCasino answers the casino; updateHubCasinoById renames it and moves its addresses; URLs are never null", async (t) => {
  const op = await makeOperator(hub.superuserDatabaseUrl);
  const added = await gql(
    hub.url,
    `mutation { hubAddCasino(input: { name: "renamed-later", baseUrl: "https://old.example", graphqlUrl: "https://old.example/graphql" }) { casinoId casino { id name baseUrl } query { __typename } } }`,
    {},
    op.header,
  );
  t.equal(added.body.errors, undefined);
  const id = added.body.data?.hubAddCasino.casinoId as string;
  t.same(added.body.data?.hubAddCasino, { casinoId: id, casino: { id, name: "renamed-later", baseUrl: "https://old.example" }, query: { __typename: "Query" } });

  const updated = await gql(hub.url, UPDATE_CASINO, { id, patch: { name: "renamed", baseUrl: "https://new.example" } }, op.header);
  t.equal(updated.body.errors, undefined);
  t.same(updated.body.data?.updateHubCasinoById, {
    clientMutationId: "c",
    hubCasino: { id, name: "renamed", baseUrl: "https://new.example", graphqlUrl: "https://old.example/graphql" },
    hubCasinoEdge: { node: { id } },
  });
  const auth = await hub.dbPool.query<{ jwks_url: string }>("select jwks_url from hub_secret.casino_auth where casino_id = $1", [id]);
  t.equal(auth.rows[0]?.jwks_url, "https://new.example/.well-known/jwks.json", "keys taken from the base URL follow it");

  const bad = await gql(hub.url, UPDATE_CASINO, { id, patch: { baseUrl: "ftp://x" } }, op.header);
  t.equal(codeOf(bad), "BAD_USER_INPUT");
  t.match(bad.body.errors?.[0]?.message, /baseUrl must be/);
  t.equal(codeOf(await gql(hub.url, UPDATE_CASINO, { id, patch: { name: "" } }, op.header)), "BAD_USER_INPUT", "an empty name is refused");
  t.equal(codeOf(await gql(hub.url, UPDATE_CASINO, { id: "0190f3a0-0000-7000-8000-000000000000", patch: { name: "x" } }, op.header)), "UNKNOWN_CASINO");
  const player = await makePlayer(hub.superuserDatabaseUrl, "casino-updater");
  t.equal(codeOf(await gql(hub.url, UPDATE_CASINO, { id, patch: { name: "mine" } }, player.header)), "FORBIDDEN");

  const playground = await gql(hub.url, "query($id: UUID!) { hubCasinoById(id: $id) { baseUrl graphqlUrl } }", { id: hub.playgroundCasinoId }, op.header);
  t.same(playground.body.data?.hubCasinoById, { baseUrl: "", graphqlUrl: "" }, "a casino without addresses answers empty strings");
});

t.test("the casino's ids: mpUserId and mpExperienceId are derived from names, with conditions and orderings", async (t) => {
  const op = await makeOperator(hub.superuserDatabaseUrl);
  const player = await makePlayer(hub.superuserDatabaseUrl, "id-bearer");
  const me = await gql(hub.url, "{ hubCurrentUser { id mpUserId } hubCurrentExperience { id name mpExperienceId userId hubUserByUserId { id } } }", {}, player.header);
  t.equal(me.body.errors, undefined);
  const user = me.body.data?.hubCurrentUser;
  const experience = me.body.data?.hubCurrentExperience;
  t.equal(user.mpUserId, uuidOf(`${player.casinoId}:id-bearer`));
  t.equal(experience.mpExperienceId, uuidOf(`${player.casinoId}:${experience.name}`));
  t.same([experience.userId, experience.hubUserByUserId], [null, null], "the hub learns of no owner");

  const found = await gql(hub.url, "query($m: UUID!) { allHubUsers(condition: { mpUserId: $m }) { nodes { id } } }", { m: user.mpUserId }, op.header);
  t.same(found.body.data?.allHubUsers.nodes, [{ id: user.id }], "an operator finds the player by mpUserId");
  const exp = await gql(hub.url, "query($m: UUID!) { allHubExperiences(condition: { mpExperienceId: $m }, orderBy: [MP_EXPERIENCE_ID_ASC]) { nodes { id } } }", { m: experience.mpExperienceId }, op.header);
  t.same(exp.body.data?.allHubExperiences.nodes, [{ id: experience.id }]);
  const ordered = await gql(hub.url, "{ allHubUsers(orderBy: [MP_USER_ID_ASC]) { nodes { mpUserId } } }", {}, op.header);
  const ids = (ordered.body.data?.allHubUsers.nodes as { mpUserId: string }[]).map((n) => n.mpUserId);
  t.same(ids, [...ids].sort(), "ordered by mpUserId");
  const other = await makePlayer(hub.superuserDatabaseUrl, "someone-else");
  const hidden = await gql(hub.url, "query($m: UUID!) { allHubUsers(condition: { mpUserId: $m }) { nodes { id } } }", { m: uuidOf(`${other.casinoId}:someone-else`) }, player.header);
  t.same(hidden.body.data?.allHubUsers.nodes, [], "a player does not find another player through it");
});

t.test("outcome bets filter and order by kind; withdrawals by mpTransferId", async (t) => {
  const op = await makeOperator(hub.superuserDatabaseUrl);
  const kinds = await gql(hub.url, `{ allHubOutcomeBets(condition: { kind: "NOTHING" }, orderBy: [KIND_DESC]) { totalCount } allHubWithdrawals(condition: { mpTransferId: "none" }, orderBy: [MP_TRANSFER_ID_ASC]) { totalCount } }`, {}, op.header);
  t.equal(kinds.body.errors, undefined);
  t.same(kinds.body.data, { allHubOutcomeBets: { totalCount: 0 }, allHubWithdrawals: { totalCount: 0 } });
});

t.test("credentials in clear: looked up through the digest, answered masked", async (t) => {
  const op = await makeOperator(hub.superuserDatabaseUrl);
  const other = await makeOperator(hub.superuserDatabaseUrl);
  const player = await makePlayer(hub.superuserDatabaseUrl, "masked-one");
  const Q = "query($k: UUID!) { hubApiKeyByKey(key: $k) { id key } }";
  const byKey = await gql(hub.url, Q, { k: other.key }, op.header);
  t.equal(byKey.body.errors, undefined);
  t.same(byKey.body.data?.hubApiKeyByKey, { id: other.id, key: "00000000-0000-0000-0000-000000000000" }, "found through the digest; the key itself is masked");
  t.same((await gql(hub.url, Q, { k: other.key.toUpperCase() }, op.header)).body.data?.hubApiKeyByKey?.id, other.id, "upper-case spelling of the same key");
  t.same((await gql(hub.url, Q, { k: "0190f3a0-0000-7000-8000-000000000000" }, op.header)).body.data, { hubApiKeyByKey: null }, "an unknown key is null");
  t.same((await gql(hub.url, Q, { k: other.key }, player.header)).body.data, { hubApiKeyByKey: null }, "a player learns nothing");
  t.same((await gql(hub.url, Q, { k: other.key })).body.data, { hubApiKeyByKey: null }, "nor does an anonymous request");

  const session = await gql(hub.url, "{ hubCurrentSession { id key userToken } }", {}, player.header);
  t.same(session.body.data?.hubCurrentSession, { id: player.sessionId, key: "00000000-0000-0000-0000-000000000000", userToken: "00000000-0000-0000-0000-000000000000" });
  t.notMatch(JSON.stringify(session.body), player.token, "the session's token is nowhere in the answer");

  const added = await gql(hub.url, `mutation { hubAddCasino(input: { name: "with-secret", baseUrl: "https://secret.example", apiKey: "controller-key-123" }) { casinoId } }`, {}, op.header);
  const casinoId = added.body.data?.hubAddCasino.casinoId as string;
  const S = "query($id: UUID!) { hubCasinoSecretById(id: $id) { id apiKey controllerId hubCasinoById { name } } hubCasinoById(id: $id) { hubCasinoSecretById { id } } }";
  const secret = await gql(hub.url, S, { id: casinoId }, op.header);
  t.equal(secret.body.errors, undefined);
  t.same(secret.body.data, {
    hubCasinoSecretById: { id: casinoId, apiKey: "00000000-0000-0000-0000-000000000000", controllerId: "00000000-0000-0000-0000-000000000000", hubCasinoById: { name: "with-secret" } },
    hubCasinoById: { hubCasinoSecretById: { id: casinoId } },
  });
  t.notMatch(JSON.stringify(secret.body), "controller-key-123", "the controller key is never returned");
  t.same((await gql(hub.url, S, { id: hub.playgroundCasinoId }, op.header)).body.data?.hubCasinoSecretById, null, "null for a casino without a stored key");
  t.same((await gql(hub.url, S, { id: casinoId }, player.header)).body.data?.hubCasinoSecretById, null, "null for a player");
});
