import "./helpers/env.js";
import t from "tap";
import { startServerProcess, type ServerProcess } from "./helpers/process.js";
import { tmpDir } from "./helpers/tmp.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";

// Documents the client got wrong: each is refused over HTTP with a message
// that says what was wrong and a stable extensions.code, and none is logged
// as a server fault. The server runs as operators run it (node dist/server.js)
// so that everything it writes, console included, is seen.

let server: ServerProcess;
t.before(async () => {
  // A database of the test kit's shared cluster: no initdb of its own.
  server = await startServerProcess({ ...(await sharedClusterDatabase(t)), HUB_DATA_DIR: tmpDir(t), LOG_LEVEL: "info" });
});
t.teardown(async () => {
  server?.child.kill("SIGINT");
  await server?.exited;
});

type Errors = { message: string; extensions?: { code?: string } }[];

async function post(query: string, operationName?: string): Promise<{ status: number; errors: Errors }> {
  const res = await fetch(`${server.url}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/graphql-response+json" },
    body: JSON.stringify({ query, operationName }),
  });
  const body = (await res.json()) as { errors?: Errors };
  return { status: res.status, errors: body.errors ?? [] };
}

async function get(query: string): Promise<{ status: number; errors: Errors }> {
  const res = await fetch(`${server.url}/graphql?query=${encodeURIComponent(query)}`, { headers: { accept: "application/graphql-response+json" } });
  const body = (await res.json()) as { errors?: Errors };
  return { status: res.status, errors: body.errors ?? [] };
}

const fields = (n: number, name = "id") => Array.from({ length: n }, () => name).join(" ");

const tooLarge: [string, string, string, RegExp][] = [
  ["1001 duplicated fields", `{ hubCurrentUser { ${fields(1000)} } }`, "QUERY_TOO_LARGE", /^Operation selects more than 1000 fields once fragments are expanded; the limit is 1000\.$/],
  ["1001 duplicated __typename", `{ ${fields(1001, "__typename")} }`, "QUERY_TOO_LARGE", /more than 1000 fields/],
  ["5000 duplicated fields", `{ hubCurrentUser { ${fields(5000)} } }`, "QUERY_TOO_LARGE", /more than 1000 fields/],
  [
    "1001 fields spread from two fragments",
    `query Big { ...A ...B } fragment A on Query { ${fields(501, "__typename")} } fragment B on Query { ${fields(500, "__typename")} }`,
    "QUERY_TOO_LARGE",
    /^Operation "Big" selects more than 1000 fields/,
  ],
  ["51 aliases", `{ ${Array.from({ length: 51 }, (_, i) => `a${i}: __typename`).join(" ")} }`, "TOO_MANY_ALIASES", /^The document uses 51 aliases; the limit is 50\.$/],
  ["20 levels deep", `{ hubCurrentUser { ${"hubCasinoByCasinoId { hubUsersByCasinoId { nodes { ".repeat(6)} id ${"} } } ".repeat(6)} } }`, "QUERY_TOO_DEEP", /nested 20 levels deep; the limit is 16/],
  ["more than 20000 tokens", `query($v: [Int] = [${"1,".repeat(20_001)}]) { __typename }`, "QUERY_TOO_LARGE", /^The document has more than 20000 tokens .*the limit is 20000\.$/],
  ["brackets nested 9000 deep", "{a".repeat(9000) + "}".repeat(9000), "QUERY_TOO_DEEP", /nested|deep/],
];

for (const [name, query, code, message] of tooLarge) {
  t.test(`${name}: 400 ${code}`, async (t) => {
    for (const [how, res] of [
      ["POST", await post(query)],
      ["GET", await get(query)],
    ] as const) {
      t.equal(res.status, 400, how);
      t.equal(res.errors.length, 1, `${how}: one error, the limit's: ${JSON.stringify(res.errors).slice(0, 300)}`);
      t.equal(res.errors[0]?.extensions?.code, code, how);
      t.match(res.errors[0]?.message, message, how);
    }
  });
}

t.test("the limits run before graphql's standard rules", async (t) => {
  // Unknown fields and a missing fragment as well: the standard rules would
  // report those, but the oversized document never reaches them.
  const res = await post(`{ nope ...Missing hubCurrentUser { ${fields(1200)} notAField } }`);
  t.equal(res.status, 400);
  t.same(
    res.errors.map((e) => e.extensions?.code),
    ["QUERY_TOO_LARGE"],
    JSON.stringify(res.errors).slice(0, 300),
  );
  // Within the limits, the standard rules do run, with their own code.
  const small = await post("{ nope }");
  t.match(small.errors, [{ message: 'Cannot query field "nope" on type "Query".', extensions: { code: "GRAPHQL_VALIDATION_FAILED" } }]);
});

t.test("a document within the limits that graphql gives up validating has a code too", async (t) => {
  // 1000 identical fields: graphql's field-merging check runs out of its work budget.
  const res = await post(`{ hubCurrentUser { ${fields(999)} } }`);
  t.equal(res.status, 400);
  t.equal(res.errors.length, 1);
  t.equal(res.errors[0]?.extensions?.code, "QUERY_TOO_COMPLEX");
  t.match(res.errors[0]?.message, /too complex to validate/);
});

t.test("a syntax error has a code", async (t) => {
  const res = await post("{ __typename");
  t.equal(res.status, 400);
  t.match(res.errors, [{ message: /^Syntax Error: Expected Name, found <EOF>\.$/, extensions: { code: "GRAPHQL_PARSE_FAILED" } }]);
});

// Subscriptions are served over WebSocket (docs/live-updates.md); over HTTP they are refused, naming the endpoint.
const subscriptions: [string, string, RegExp][] = [
  ["anonymous", "subscription { __typename }", /^Subscriptions are served over WebSocket only: connect to ws:\/\/127\.0\.0\.1:\d+\/graphql with the graphql-transport-ws protocol \(the graphql-ws client\); received a subscription over HTTP POST\.$/],
  ["named, with a field", "subscription Watch { hubBalanceAlert { currencyKey } }", /over WebSocket only.*HTTP POST/],
];
for (const [name, query, message] of subscriptions) {
  t.test(`a subscription over HTTP (${name}) is refused, naming the WebSocket endpoint`, async (t) => {
    const res = await post(query);
    t.equal(res.status, 400);
    t.equal(res.errors.length, 1, JSON.stringify(res.errors));
    t.equal(res.errors[0]?.extensions?.code, "SUBSCRIPTION_NEEDS_WEBSOCKET");
    t.match(res.errors[0]?.message, message);
    const viaGet = await get(query);
    t.equal(viaGet.status, 400);
    t.equal(viaGet.errors[0]?.extensions?.code, "SUBSCRIPTION_NEEDS_WEBSOCKET", "over GET too");
    t.match(viaGet.errors[0]?.message, /HTTP GET/);
  });
}

t.test("a query next to a subscription in one document runs when it is the one asked for", async (t) => {
  const res = await fetch(`${server.url}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/graphql-response+json" },
    body: JSON.stringify({ query: "query Q { __typename } subscription S { hubBalanceAlert { currencyKey } }", operationName: "Q" }),
  });
  t.equal(res.status, 200);
  t.same(await res.json(), { data: { __typename: "Query" } });
});

t.test("none of the above is logged as a server fault", async (t) => {
  // A last request, so that every line of the ones before has been written.
  t.equal((await post("{ __typename }")).status, 200);
  const lines = server.output().split("\n").filter(Boolean);
  const requestLines = lines.filter((line) => /"reqId"/.test(line));
  t.ok(requestLines.length > 0, "the requests were logged (positive control)");
  const faults = lines.filter((line) => {
    try {
      return (JSON.parse(line) as { level?: number }).level! >= 50;
    } catch {
      return true; // console output, as grafast's planner writes when it fails
    }
  });
  t.same(faults, [], "no error-level line and nothing outside the logger");
  t.notMatch(server.output(), /No subscription type|INTERNAL_SERVER_ERROR|Validation aborted/);
});
