import "./helpers/env.js";
import t from "tap";
import fs from "node:fs";
import path from "node:path";
import { createHash } from "node:crypto";
import http from "node:http";
import { SignJWT, exportJWK, generateKeyPair } from "jose";
import { buildSchema, parse, isObjectType, isInputObjectType, isEnumType, type GraphQLField, type GraphQLSchema, type DefinitionNode } from "graphql";
import { createCurrency, createHouseBankroll, getHouseBankroll, startTestServer, type TestServer } from "@hubpkg/hub/test";
import { gql } from "./helpers/http.js";
import { makeOperator, makePlayer, withPool } from "./helpers/credentials.js";
// Internal: a session whose key is a UUID, as the original issued them.
import { createSession } from "../dist/src/auth/credentials.js";
import { ROOT } from "./helpers/process.js";
import { tmpDir } from "./helpers/tmp.js";
// Internal (not a public sub-path): the recorder the token exchange calls.
import { recordJwkSet } from "../dist/src/auth/jwk-sets.js";

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
        const args = (f.arguments ?? []).map((a) => `${a.name.value}: ${printType(a.type)}`).sort().join(", ");
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
    const shape = (f: GraphQLField<unknown, unknown>) => `${f.args.map((a) => `${a.name}: ${String(a.type)}`).sort().join(", ")} -> ${String(f.type)}`;
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
  const taken = await gql(hub.url, UPDATE_CASINO, { id, patch: { name: "playground" } }, op.header);
  t.equal(codeOf(taken), "CONSTRAINT_VIOLATION", "another casino's name is refused");
  const playgroundRename = await gql(hub.url, UPDATE_CASINO, { id: hub.playgroundCasinoId, patch: { name: "not-the-playground" } }, op.header);
  t.equal(codeOf(playgroundRename), "BAD_USER_INPUT", "the playground keeps its name");
  t.match(playgroundRename.body.errors?.[0]?.message, /the playground casino keeps its name "playground"/);
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
  const searched = await gql(hub.url, '{ hubUserSearch(nameContains: "id-bearer") { nodes { id mpUserId } } }', {}, op.header);
  t.same(searched.body.data?.hubUserSearch.nodes, [{ id: user.id, mpUserId: user.mpUserId }], "hubUserSearch answers it too");
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

  const C = "query($k: UUID) { allHubApiKeys(condition: { key: $k }) { nodes { id } } }";
  t.same((await gql(hub.url, C, { k: other.key }, op.header)).body.data?.allHubApiKeys.nodes, [{ id: other.id }], "condition { key } compares digests");
  t.same((await gql(hub.url, C, { k: null }, op.header)).body.data?.allHubApiKeys.nodes, [], "a null key matches nothing");
  t.same((await gql(hub.url, C, { k: other.key }, player.header)).body.data?.allHubApiKeys.nodes, [], "a player sees no key through it");
  const uuidSession = await withPool(hub.superuserDatabaseUrl, async (pool) => {
    const user = await pool.query<{ id: string; casino_id: string }>("select id, casino_id from hub.user where id = $1", [player.userId]);
    return createSession(pool, { userId: user.rows[0]!.id, casinoId: user.rows[0]!.casino_id, experienceId: player.experienceId });
  });
  const SC = "query($k: UUID) { allHubSessions(condition: { key: $k }) { nodes { id } } }";
  t.same((await gql(hub.url, SC, { k: uuidSession.token }, op.header)).body.data?.allHubSessions.nodes, [{ id: uuidSession.sessionId }], "sessions too, by the digest of their key");

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

const CLAIM = `mutation($c: String!) { hubClaimFaucet(input: { currency: $c }) { faucetClaim { id amount currencyKey userId experienceId hubUserByUserId { uname } } balance { amount } } }`;
const SET_FAUCET = `mutation($casinoId: UUID!, $key: String!, $amount: Float, $cooldown: Int) {
  hubSetFaucet(input: { casinoId: $casinoId, currencyKey: $key, amount: $amount, cooldownSeconds: $cooldown }) { enabled amount cooldownSeconds }
}`;

t.test("the faucet: an operator enables a currency; a player claims once per cooldown, through the ledger", async (t) => {
  const op = await makeOperator(hub.superuserDatabaseUrl);
  const alice = await makePlayer(hub.superuserDatabaseUrl, "faucet-alice");
  const bob = await makePlayer(hub.superuserDatabaseUrl, "faucet-bob");
  const casinoId = alice.casinoId;
  await createCurrency(hub.dbPool, { casinoId, key: "DRIP" });

  t.equal(codeOf(await gql(hub.url, CLAIM, { c: "DRIP" }, alice.header)), "FAUCET_NOT_ENABLED", "nothing to claim before the operator enables it");
  t.equal(codeOf(await gql(hub.url, SET_FAUCET, { casinoId, key: "DRIP", amount: 100 }, alice.header)), "FORBIDDEN", "a player cannot enable it");
  t.equal(codeOf(await gql(hub.url, SET_FAUCET, { casinoId, key: "NOPE", amount: 100 }, op.header)), "UNKNOWN_CURRENCY");
  t.equal(codeOf(await gql(hub.url, SET_FAUCET, { casinoId, key: "DRIP", amount: 0.5 }, op.header)), "INVALID_AMOUNT");
  const enabled = await gql(hub.url, SET_FAUCET, { casinoId, key: "DRIP", amount: 100, cooldown: 3600 }, op.header);
  t.same(enabled.body.data?.hubSetFaucet, { enabled: true, amount: 100, cooldownSeconds: 3600 });

  const first = await gql(hub.url, CLAIM, { c: "DRIP" }, alice.header);
  t.equal(first.body.errors, undefined);
  const claim = first.body.data?.hubClaimFaucet;
  t.match(claim, { faucetClaim: { amount: 100, currencyKey: "DRIP", userId: alice.userId, experienceId: alice.experienceId, hubUserByUserId: { uname: "faucet-alice" } }, balance: { amount: 100 } });

  const again = await gql(hub.url, CLAIM, { c: "DRIP" }, alice.header);
  t.equal(codeOf(again), "FAUCET_TOO_SOON", "a second claim within the cooldown is refused");
  const wait = again.body.errors?.[0]?.extensions?.retryAfterSeconds as number;
  t.ok(wait > 3500 && wait <= 3600, `and says how long to wait (${wait} s)`);

  // Ten claims at once by bob: exactly one passes.
  const burst = await Promise.all(Array.from({ length: 10 }, () => gql(hub.url, CLAIM, { c: "DRIP" }, bob.header)));
  t.equal(burst.filter((r) => !r.body.errors).length, 1, "of concurrent claims exactly one is credited");
  t.same([...new Set(burst.filter((r) => r.body.errors).map(codeOf))], ["FAUCET_TOO_SOON"], "the others are refused as too soon");

  const ledger = await hub.dbPool.query<{ user_id: string; amount_delta: number; reason: string; actor: string }>(
    "select user_id, amount_delta, reason, actor from hub.ledger where currency_key = 'DRIP' and casino_id = $1 order by id",
    [casinoId],
  );
  t.same(ledger.rows, [
    { user_id: alice.userId, amount_delta: 100, reason: "faucet", actor: `user:${alice.userId}` },
    { user_id: bob.userId, amount_delta: 100, reason: "faucet", actor: `user:${bob.userId}` },
  ], "each claim is one ledger credit");

  const mine = await gql(hub.url, "{ allHubFaucetClaims { nodes { userId } } hubCurrentUser { hubFaucetClaimsByUserId { totalCount } } }", {}, alice.header);
  t.same(mine.body.data, { allHubFaucetClaims: { nodes: [{ userId: alice.userId }] }, hubCurrentUser: { hubFaucetClaimsByUserId: { totalCount: 1 } } }, "a player sees only their own claims");
  const byId = await gql(hub.url, "query($id: UUID!) { hubFaucetClaimById(id: $id) { id } }", { id: claim.faucetClaim.id }, bob.header);
  t.same(byId.body.data, { hubFaucetClaimById: null }, "and not another player's by id");
  const all = await gql(hub.url, "query($id: UUID!) { hubFaucetClaimById(id: $id) { id } hubCasinoById(id: $c) { hubFaucetClaimsByCasinoId(condition: { currencyKey: \"DRIP\" }) { totalCount } } }".replace("$id: UUID!)", "$id: UUID!, $c: UUID!)"), { id: claim.faucetClaim.id, c: casinoId }, op.header);
  t.same(all.body.data, { hubFaucetClaimById: { id: claim.faucetClaim.id }, hubCasinoById: { hubFaucetClaimsByCasinoId: { totalCount: 2 } } }, "the operator sees them all");

  const disabled = await gql(hub.url, SET_FAUCET, { casinoId, key: "DRIP", amount: null }, op.header);
  t.same(disabled.body.data?.hubSetFaucet, { enabled: false, amount: null, cooldownSeconds: null });
  const carol = await makePlayer(hub.superuserDatabaseUrl, "faucet-carol");
  t.equal(codeOf(await gql(hub.url, CLAIM, { c: "DRIP" }, carol.header)), "FAUCET_NOT_ENABLED", "disabled again");
  t.equal(codeOf(await gql(hub.url, CLAIM, { c: "DRIP" }, op.header)), "FORBIDDEN", "an operator does not claim");
  t.equal(codeOf(await gql(hub.url, CLAIM, { c: "DRIP" })), "UNAUTHENTICATED");
});

t.test("JWK sets: the keys a casino's JWKS URL served are kept, with a snapshot per distinct set, for operators", async (t) => {
  const op = await makeOperator(hub.superuserDatabaseUrl);
  const { publicKey, privateKey } = await generateKeyPair("ES256");
  const jwk = { ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256", use: "sig" };
  const server = http.createServer((_req, res) => {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => server.close());
  const jwksUrl = `http://127.0.0.1:${(server.address() as import("node:net").AddressInfo).port}/jwks.json`;
  const added = await gql(hub.url, `mutation($u: String!) { hubAddCasino(input: { name: "jwk-casino", jwksUrl: $u }) { casinoId } }`, { u: jwksUrl }, op.header);
  const casinoId = added.body.data?.hubAddCasino.casinoId as string;
  const SETS = `query($c: UUID!) { hubJwkSetByCasinoId(casinoId: $c) { casinoId jwks updatedAt hubCasinoByCasinoId { name } }
    hubCasinoById(id: $c) { hubJwkSetByCasinoId { casinoId } hubJwkSetSnapshotsByCasinoId { nodes { id jwks } } } }`;
  t.same((await gql(hub.url, SETS, { c: casinoId }, op.header)).body.data?.hubJwkSetByCasinoId, null, "nothing fetched yet");

  const AUTH = "mutation($c: UUID!, $t: String!) { hubAuthenticate(input: { casinoId: $c, userToken: $t }) { user { uname } } }";
  for (const uname of ["jwk-yuki", "jwk-kai"]) {
    const token = await new SignJWT({ uname }).setProtectedHeader({ alg: "ES256", kid: "k1" }).setExpirationTime("1m").sign(privateKey);
    const res = await gql(hub.url, AUTH, { c: casinoId, t: token });
    t.equal(res.body.errors, undefined, `${uname} authenticated`);
  }
  const sets = await gql(hub.url, SETS, { c: casinoId }, op.header);
  t.equal(sets.body.errors, undefined);
  t.match(sets.body.data?.hubJwkSetByCasinoId, { casinoId, jwks: { keys: [jwk] }, hubCasinoByCasinoId: { name: "jwk-casino" } });
  const snapshots = sets.body.data?.hubCasinoById.hubJwkSetSnapshotsByCasinoId.nodes as { id: string; jwks: unknown }[];
  t.same(snapshots.map((s) => s.jwks), [{ keys: [jwk] }], "one snapshot for the one set that verified both tokens");

  const rotated = { keys: [{ ...jwk, kid: "k2" }] };
  await recordJwkSet(hub.dbPool, casinoId, rotated);
  const after = await gql(hub.url, SETS, { c: casinoId }, op.header);
  t.same(after.body.data?.hubJwkSetByCasinoId.jwks, rotated, "the latest set replaces the previous");
  t.same((after.body.data?.hubCasinoById.hubJwkSetSnapshotsByCasinoId.nodes as { jwks: unknown }[]).map((s) => s.jwks), [{ keys: [jwk] }, rotated], "and a second snapshot is kept");
  const byId = await gql(hub.url, "query($id: UUID!) { hubJwkSetSnapshotById(id: $id) { id casinoId } }", { id: snapshots[0]!.id }, op.header);
  t.same(byId.body.data, { hubJwkSetSnapshotById: { id: snapshots[0]!.id, casinoId } });

  const player = await makePlayer(hub.superuserDatabaseUrl, "jwk-reader");
  const asPlayer = await gql(hub.url, "query($c: UUID!, $id: UUID!) { hubJwkSetByCasinoId(casinoId: $c) { casinoId } hubJwkSetSnapshotById(id: $id) { id } }", { c: casinoId, id: snapshots[0]!.id }, player.header);
  t.same(asPlayer.body.data, { hubJwkSetByCasinoId: null, hubJwkSetSnapshotById: null }, "players see none of it");
});
