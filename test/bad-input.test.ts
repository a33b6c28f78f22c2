import "./helpers/env.js";
import net from "node:net";
import t from "tap";
import { startAndListen, defaultPlugins, type RunningServer } from "@hubpkg/hub";
import { configureReferenceRoutes, CoinflipBetPlugin, CoinflipPlanPlugin, FortunePlugin, referenceMigrationsPath } from "@hubpkg/hub/plugins";
import { gql } from "./helpers/http.js";
import { makePlayer } from "./helpers/credentials.js";
import { tmpDir } from "./helpers/tmp.js";

// A catalogue of hostile or broken input: each case must get a clear 4xx or a
// GraphQL error, never a 5xx, and the server must keep answering afterwards.

let hub: RunningServer;
let player: Awaited<ReturnType<typeof makePlayer>>;
const logs: string[] = [];

t.before(async () => {
  hub = await startAndListen({
    port: 0,
    logLevel: "warn",
    handleSignals: false,
    dataDir: tmpDir(t),
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: referenceMigrationsPath,
    plugins: [...defaultPlugins, FortunePlugin, CoinflipPlanPlugin, CoinflipBetPlugin],
    configureApp: configureReferenceRoutes,
    introspection: false,
  });
  player = await makePlayer(hub.superuserDatabaseUrl, "fuzz");
});
t.teardown(() => hub?.stop());

async function post(body: string | Buffer, headers: Record<string, string> = { "content-type": "application/json" }) {
  const res = await fetch(`${hub.url}/graphql`, { method: "POST", headers, body });
  const text = await res.text();
  return { status: res.status, text };
}

const bodies: [string, string | Buffer, Record<string, string> | undefined, number, RegExp][] = [
  ["not JSON", "{query", undefined, 400, /JSON/i],
  ["empty body", "", undefined, 400, /./],
  ["a JSON array", "[1,2]", undefined, 400, /./],
  ["a JSON number", "42", undefined, 400, /./],
  ["a JSON string", '"{ __typename }"', undefined, 400, /./],
  ["null", "null", undefined, 400, /./],
  ["query not a string", JSON.stringify({ query: 42 }), undefined, 400, /query/i],
  ["query missing", JSON.stringify({ variables: {} }), undefined, 400, /query/i],
  ["variables not an object", JSON.stringify({ query: "{ __typename }", variables: [1] }), undefined, 400, /variables/i],
  ["unknown operation name", JSON.stringify({ query: "query A { __typename }", operationName: "B" }), undefined, 400, /B/],
  ["syntax error", JSON.stringify({ query: "{ __typename" }), undefined, 400, /Syntax Error/],
  ["unknown field", JSON.stringify({ query: "{ nope }" }), undefined, 400, /Cannot query field .{0,3}nope/],
  ["wrong variable type", JSON.stringify({ query: "query($id: UUID!) { hubUserById(id: $id) { id } }", variables: { id: 42 } }), undefined, 400, /./],
  ["malformed UUID variable", JSON.stringify({ query: "query($id: UUID!) { hubUserById(id: $id) { id } }", variables: { id: "not-a-uuid" } }), undefined, 400, /./],
  ["text/plain content type", "{ __typename }", { "content-type": "text/plain" }, 415, /./],
  ["no content type", JSON.stringify({ query: "{ __typename }" }), {}, 415, /./],
  ["binary garbage", Buffer.from([0xff, 0xfe, 0x00, 0x81]), undefined, 400, /./],
  ["body over the 1 MiB limit", JSON.stringify({ query: "{ __typename }", variables: { x: "x".repeat(1.5 * 1024 * 1024) } }), undefined, 413, /too large/i],
];

for (const [name, body, headers, status, message] of bodies) {
  t.test(`/graphql body: ${name} → ${status}`, async (t) => {
    const res = await post(body, headers);
    t.equal(res.status, status, res.text.slice(0, 200));
    t.match(res.text, message);
  });
}

t.test("a query nested 50 levels deep is refused before execution", async (t) => {
  let selection = "id";
  for (let i = 0; i < 50; i++) selection = `hubCasinoByCasinoId { hubUsersByCasinoId(first: 1) { nodes { ${selection} } } }`;
  const res = await gql(hub.url, `{ hubCurrentUser { ${selection} } }`, {}, player.header);
  t.equal(res.status, 400);
  t.match(res.body.errors?.[0], { message: /nested \d+ levels deep; the limit is 16/, extensions: { code: "QUERY_TOO_DEEP" } });
});

t.test("1000 aliases are refused before execution", async (t) => {
  const res = await gql(hub.url, `{ ${Array.from({ length: 1000 }, (_, i) => `a${i}: randomFortune { id }`).join(" ")} }`);
  t.equal(res.status, 400);
  t.ok(res.body.errors?.some((e) => e.message === "The document uses 1000 aliases; the limit is 50." && e.extensions?.code === "TOO_MANY_ALIASES"));
});

t.test("fragment fan-out is refused", async (t) => {
  const frags = ["fragment F0 on Query { __typename }"];
  for (let i = 1; i <= 12; i++) frags.push(`fragment F${i} on Query { ...F${i - 1} a${i}: __typename ...F${i - 1} }`);
  const res = await gql(hub.url, `{ ...F12 } ${frags.join(" ")}`);
  t.equal(res.status, 400);
  t.match(res.body.errors?.map((e) => e.message).join(" "), /more than 1000 fields/);
});

t.test("introspection can be switched off (production default)", async (t) => {
  const res = await gql(hub.url, "{ __schema { queryType { name } } }");
  t.equal(res.status, 400);
  t.match(res.body.errors?.[0]?.message, /introspection/i);
  t.same((await gql(hub.url, "{ __typename }")).body, { data: { __typename: "Query" } }, "__typename is not introspection");
});

const wagers: [string, string, RegExp][] = [
  ["NaN as a string", '"NaN"', /Float cannot represent/],
  ["Infinity literal overflow", "1e999", /finite/i],
  ["negative", "-5", /at least 1/],
  ["zero", "0", /at least 1/],
  ["a string", '"ten"', /Float cannot represent/],
  ["null", "null", /./],
  ["huge but finite", "1e300", /./],
];
for (const [name, literal, message] of wagers) {
  t.test(`makeCoinflip wager ${name}: a GraphQL error, not a 500`, async (t) => {
    const res = await gql(hub.url, `mutation { makeCoinflip(input: { currency: "HOUSE", wager: ${literal} }) { id } }`, {}, player.header);
    t.ok(res.status < 500, `status ${res.status}`);
    if (name === "huge but finite") {
      // Allowed by the reference plugin's rules (spec §4.3 rule 4: no balance checks): it must just not crash.
      t.ok(res.body.data !== undefined || res.body.errors !== undefined);
      return;
    }
    t.match(res.body.errors?.map((e) => e.message).join(" "), message);
  });
}

t.test("makeCoinflipBet with bad input is a clear error", async (t) => {
  const cases: [string, RegExp][] = [
    ['{ wager: -1, currency: "HOUSE", side: HEADS }', /wager/i],
    ['{ wager: 2, currency: "NOPE", side: HEADS }', /NOPE/],
    ['{ wager: 2, currency: "HOUSE", side: EDGE }', /EDGE/],
    ['{ wager: 2, currency: "HOUSE" }', /side/],
    ["{}", /wager/],
  ];
  for (const [input, message] of cases) {
    const res = await gql(hub.url, `mutation { makeCoinflipBet(input: ${input}) { balance } }`, {}, player.header);
    t.ok(res.status < 500, `${input}: status ${res.status}`);
    t.match(res.body.errors?.map((e) => e.message).join(" "), message, input);
  }
  const missing = await gql(hub.url, "mutation { makeCoinflip { id } }", {}, player.header);
  t.match(missing.body.errors?.[0]?.message, /argument "input" of type "MakeCoinflipInput!" is required/);
});

t.test("Authorization edge cases never reach a 5xx", async (t) => {
  const values = ["session:", "apikey:", "SESSION:x", `apikey:${"a".repeat(64 * 1024 - 10)}`, "session:' or ''='", "session:x y", "   ", "apikey:%00"];
  for (const value of values) {
    const res = await fetch(`${hub.url}/bets`, { headers: { authorization: value } });
    t.equal(res.status, 401, JSON.stringify(value.slice(0, 20)));
  }
});

t.test("a header over the 96 KiB limit is refused with 431, and the server lives on", async (t) => {
  const { port } = new URL(hub.url);
  const response = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(Number(port), "127.0.0.1");
    let data = "";
    socket.on("data", (c) => (data += c.toString()));
    socket.on("end", () => resolve(data));
    socket.on("error", reject);
    socket.write(`GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: session:${"a".repeat(100 * 1024)}\r\n\r\n`);
  });
  t.match(response, /^HTTP\/1\.1 431/);
  t.equal((await fetch(`${hub.url}/health`)).status, 200);
  // A control character (fetch refuses to send one; a raw client can).
  const control = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(Number(port), "127.0.0.1");
    let data = "";
    socket.on("data", (c) => (data += c.toString()));
    socket.on("end", () => resolve(data));
    socket.on("error", reject);
    socket.write("GET /bets HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: session:\u0001abc\r\n\r\n");
  });
  t.match(control, /^HTTP\/1\.1 (400|401)/, "a 4xx, never a 5xx");
});
