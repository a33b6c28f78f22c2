import "./helpers/env.js";
import net from "node:net";
import t, { type Test } from "tap";
import { defaultPlugins } from "@hubpkg/hub";
import { startTestServer, type TestServer } from "@hubpkg/hub/test";
import { configureReferenceRoutes, CoinflipBetPlugin, CoinflipPlanPlugin, FortunePlugin, referenceMigrationsPath } from "@hubpkg/hub/plugins";
import { gql } from "./helpers/http.js";
import { makePlayer } from "./helpers/credentials.js";

// A catalogue of hostile or broken input: each case must get a clear 4xx or a
// GraphQL error, never a 5xx, and the server must keep answering afterwards.

let hub: TestServer;
let player: Awaited<ReturnType<typeof makePlayer>>;
const logs: string[] = [];

t.before(async () => {
  // A database of the test kit's shared cluster (a template copy): no initdb of its own.
  hub = await startTestServer({
    logLevel: "warn",
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

/** Fastify's own answer to a body it cannot parse: not GraphQL-shaped, but with a stable code. */
const fastifyError = (statusCode: number, code: string, error: string, message: string) => ({ statusCode, code, error, message });
/** grafserv's answer to a body of the wrong shape: a GraphQL error carrying the HTTP status, no code. */
const grafservError = (statusCode: number, message: string) => ({ errors: [{ message, extensions: { statusCode } }] });
/** graphql-js's errors: validation and variables get a code from the hub; syntax errors have none (pinned). */
const graphqlError = (message: string, line: number, column: number, code?: string) => ({
  errors: [{ message, locations: [{ line, column }], extensions: code ? { code } : {} }],
});
const PARSING_FAILED = "Parsing failed, please check that the data you're sending to the server is correct";

const bodies: [string, string | Buffer, Record<string, string> | undefined, number, unknown][] = [
  ["not JSON", "{query", undefined, 400, fastifyError(400, "FST_ERR_CTP_INVALID_JSON_BODY", "Bad Request", "Body is not valid JSON but content-type is set to 'application/json'")],
  ["empty body", "", undefined, 400, fastifyError(400, "FST_ERR_CTP_EMPTY_JSON_BODY", "Bad Request", "Body cannot be empty when content-type is set to 'application/json'")],
  ["a JSON array", "[1,2]", undefined, 400, grafservError(400, "Invalid body; expected object")],
  ["a JSON number", "42", undefined, 400, grafservError(400, PARSING_FAILED)],
  ["a JSON string", '"{ __typename }"', undefined, 400, grafservError(400, PARSING_FAILED)],
  ["null", "null", undefined, 400, grafservError(400, PARSING_FAILED)],
  ["query not a string", JSON.stringify({ query: 42 }), undefined, 400, grafservError(400, "query must be a string")],
  ["query missing", JSON.stringify({ variables: {} }), undefined, 400, grafservError(400, "query must be a string")],
  ["variables not an object", JSON.stringify({ query: "{ __typename }", variables: [1] }), undefined, 400, grafservError(400, "Invalid variables; expected JSON-encoded object")],
  ["unknown operation name", JSON.stringify({ query: "query A { __typename }", operationName: "B" }), undefined, 400, { errors: [{ message: 'Unknown operation named "B".', extensions: { code: "OPERATION_RESOLUTION_FAILURE" } }] }],
  ["syntax error", JSON.stringify({ query: "{ __typename" }), undefined, 400, graphqlError("Syntax Error: Expected Name, found <EOF>.", 1, 13, "GRAPHQL_PARSE_FAILED")],
  ["unknown field", JSON.stringify({ query: "{ nope }" }), undefined, 400, graphqlError('Cannot query field "nope" on type "Query".', 1, 3, "GRAPHQL_VALIDATION_FAILED")],
  [
    "wrong variable type",
    JSON.stringify({ query: "query($id: UUID!) { hubUserById(id: $id) { id } }", variables: { id: 42 } }),
    undefined,
    400,
    graphqlError('Variable "$id" got invalid value 42; Invalid UUID, expected 32 hexadecimal characters, optionally with hyphens', 1, 7, "BAD_USER_INPUT"),
  ],
  [
    "malformed UUID variable",
    JSON.stringify({ query: "query($id: UUID!) { hubUserById(id: $id) { id } }", variables: { id: "not-a-uuid" } }),
    undefined,
    400,
    graphqlError('Variable "$id" got invalid value "not-a-uuid"; Invalid UUID, expected 32 hexadecimal characters, optionally with hyphens', 1, 7, "BAD_USER_INPUT"),
  ],
  [
    "a NUL character in a variable",
    JSON.stringify({ query: "query($name: String!) { hubCasinoByName(name: $name) { id } }", variables: { name: "a\u0000b" } }),
    undefined,
    400,
    { errors: [{ message: 'Variable "$name" contains a NUL character (\\u0000), which the database cannot store.', extensions: { statusCode: 400, code: "BAD_USER_INPUT" } }] },
  ],
  [
    "a NUL character inside an input object variable",
    JSON.stringify({ query: "query($c: HubUserCondition) { allHubUsers(condition: $c) { totalCount } }", variables: { c: { uname: "\u0000" } } }),
    undefined,
    400,
    { errors: [{ message: 'Variable "$c" contains a NUL character (\\u0000) (at c.uname), which the database cannot store.', extensions: { statusCode: 400, code: "BAD_USER_INPUT" } }] },
  ],
  [
    "a NUL character in a literal",
    JSON.stringify({ query: '{ hubCasinoByName(name: "a\\u0000b") { id } }' }),
    undefined,
    400,
    {
      errors: [
        {
          message: 'The value of argument "name" of field "hubCasinoByName" contains a NUL character (\\u0000), which the database cannot store.',
          locations: [{ line: 1, column: 25 }],
          extensions: { code: "BAD_USER_INPUT" },
        },
      ],
    },
  ],
  ["text/plain content type", "{ __typename }", { "content-type": "text/plain" }, 415, grafservError(415, "Media type 'text/plain' is not allowed")],
  ["no content type", JSON.stringify({ query: "{ __typename }" }), {}, 415, grafservError(415, "Media type 'text/plain' is not allowed")],
  ["binary garbage", Buffer.from([0xff, 0xfe, 0x00, 0x81]), undefined, 400, fastifyError(400, "FST_ERR_CTP_INVALID_JSON_BODY", "Bad Request", "Body is not valid JSON but content-type is set to 'application/json'")],
  [
    "body over the 1 MiB limit",
    JSON.stringify({ query: "{ __typename }", variables: { x: "x".repeat(1.5 * 1024 * 1024) } }),
    undefined,
    413,
    fastifyError(413, "FST_ERR_CTP_BODY_TOO_LARGE", "Payload Too Large", "Request body is too large"),
  ],
];

for (const [name, body, headers, status, expected] of bodies) {
  t.test(`/graphql body: ${name} → ${status}`, async (t) => {
    const res = await post(body, headers);
    t.equal(res.status, status, res.text.slice(0, 200));
    t.same(JSON.parse(res.text), expected);
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
  t.ok(
    res.body.errors?.some((e) => /^Operation selects more than 1000 fields once fragments are expanded; the limit is 1000\.$/.test(e.message) && e.extensions?.code === "QUERY_TOO_LARGE"),
    JSON.stringify(res.body.errors).slice(0, 300),
  );
});

t.test("introspection can be switched off (production default)", async (t) => {
  const res = await gql(hub.url, "{ __schema { queryType { name } } }");
  t.equal(res.status, 400);
  t.same(res.body.errors?.map((e) => [e.message, e.extensions?.code]), [
    ['GraphQL introspection has been disabled, but the requested query contained the field "__schema".', "GRAPHQL_VALIDATION_FAILED"],
    ['GraphQL introspection has been disabled, but the requested query contained the field "queryType".', "GRAPHQL_VALIDATION_FAILED"],
  ]);
  t.same((await gql(hub.url, "{ __typename }")).body, { data: { __typename: "Query" } }, "__typename is not introspection");
});

/** One GraphQL error on a field, with its message and code. */
function oneFieldError(t: Test, res: { status: number; body: { data?: unknown; errors?: { message: string; extensions?: Record<string, unknown> }[] } }, field: string, message: string, code: string) {
  t.equal(res.status, 200);
  t.same(res.body.data, { [field]: null });
  t.equal(res.body.errors?.length, 1, JSON.stringify(res.body.errors));
  t.equal(res.body.errors?.[0]?.message, message);
  t.equal(res.body.errors?.[0]?.extensions?.code, code);
}

const FLOAT_WAGER = (found: string) => `Float cannot represent non numeric value: ${found}`;
const wagers: [string, string, { validation: boolean; message: string }][] = [
  // Refused by GraphQL's Float coercion while validating the document.
  ["NaN as a string", '"NaN"', { validation: true, message: FLOAT_WAGER('"NaN"') }],
  ["a string", '"ten"', { validation: true, message: FLOAT_WAGER('"ten"') }],
  ["null", "null", { validation: true, message: 'Expected value of type "Float!", found null.' }],
  // Refused by the plugin.
  ["Infinity literal overflow", "1e999", { validation: false, message: "makeCoinflip: the wager must be a finite number, received Infinity." }],
  ["negative", "-5", { validation: false, message: "makeCoinflip: the wager must be at least 1, received -5." }],
  ["zero", "0", { validation: false, message: "makeCoinflip: the wager must be at least 1, received 0." }],
];
for (const [name, literal, expected] of wagers) {
  t.test(`makeCoinflip wager ${name}: ${expected.validation ? "GRAPHQL_VALIDATION_FAILED" : "BAD_USER_INPUT"}`, async (t) => {
    const res = await gql(hub.url, `mutation { makeCoinflip(input: { currency: "HOUSE", wager: ${literal} }) { id } }`, {}, player.header);
    if (!expected.validation) return oneFieldError(t, res, "makeCoinflip", expected.message, "BAD_USER_INPUT");
    t.equal(res.status, 400);
    t.equal(res.body.data, undefined, "not executed");
    t.same(res.body.errors?.map((e) => [e.message, e.extensions?.code]), [[expected.message, "GRAPHQL_VALIDATION_FAILED"]]);
  });
}

t.test("makeCoinflip wager 1e300: accepted, stored and answered exactly (the reference plugin has no upper bound)", async (t) => {
  const res = await gql(hub.url, 'mutation { makeCoinflip(input: { currency: "HOUSE", wager: 1e300 }) { id wager net } }', {}, player.header);
  t.equal(res.status, 200);
  t.equal(res.body.errors, undefined);
  const flip = res.body.data?.makeCoinflip as { id: string; wager: number; net: number };
  t.match(flip.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  t.equal(flip.wager, 1e300);
  t.ok(flip.net === 1e300 * 0.99 || flip.net === -1e300, `net ${flip.net} is a win (×0.99) or a loss`);
});

t.test("makeCoinflipBet with bad input is a clear error", async (t) => {
  const refused: [string, string, string][] = [
    [
      '{ wager: -1, currency: "HOUSE", side: HEADS }',
      "makeCoinflipBet: the wager must be a whole number of base units from 2 to 9007199254740991; received -1. Amounts are whole base units of the currency (display_unit_scale base units make one display unit).",
      "INVALID_AMOUNT",
    ],
    ['{ wager: 2, currency: "NOPE", side: HEADS }', 'makeCoinflipBet: unknown currency "NOPE"; the casino of this session has no such currency.', "UNKNOWN_CURRENCY"],
  ];
  for (const [input, message, code] of refused) {
    t.test(input, async (t) => oneFieldError(t, await gql(hub.url, `mutation { makeCoinflipBet(input: ${input}) { balance } }`, {}, player.header), "makeCoinflipBet", message, code));
  }
  // Refused while validating the document.
  const invalid: [string, string[]][] = [
    ['{ wager: 2, currency: "HOUSE", side: EDGE }', ['Value "EDGE" does not exist in "CoinSide" enum.']],
    ['{ wager: 2, currency: "HOUSE" }', ['Field "MakeCoinflipBetInput.side" of required type "CoinSide!" was not provided.']],
    [
      "{}",
      [
        'Field "MakeCoinflipBetInput.wager" of required type "Float!" was not provided.',
        'Field "MakeCoinflipBetInput.currency" of required type "String!" was not provided.',
        'Field "MakeCoinflipBetInput.side" of required type "CoinSide!" was not provided.',
      ],
    ],
  ];
  for (const [input, messages] of invalid) {
    const res = await gql(hub.url, `mutation { makeCoinflipBet(input: ${input}) { balance } }`, {}, player.header);
    t.equal(res.status, 400, input);
    t.same(res.body.errors?.map((e) => [e.message, e.extensions?.code]), messages.map((m) => [m, "GRAPHQL_VALIDATION_FAILED"]), input);
  }
  const missing = await gql(hub.url, "mutation { makeCoinflip { id } }", {}, player.header);
  t.equal(missing.status, 400);
  t.same(missing.body.errors?.map((e) => [e.message, e.extensions?.code]), [
    ['Field "makeCoinflip" argument "input" of type "MakeCoinflipInput!" is required, but it was not provided.', "GRAPHQL_VALIDATION_FAILED"],
  ]);
});

t.test("pagination arguments and NUL characters the database would refuse", async (t) => {
  const cases: [string, string, Record<string, unknown>, string, string][] = [
    ["first: -1", "{ allCoinflips(first: -1) { totalCount } }", {}, "allCoinflips", "first must not be negative; received -1."],
    ["offset: -5", "{ allCoinflips(offset: -5) { nodes { id } } }", {}, "allCoinflips", "offset must not be negative; received -5."],
    ["last: $n = -2", "query($n: Int) { allCoinflips(last: $n) { nodes { id } } }", { n: -2 }, "allCoinflips", "last must not be negative; received -2."],
    ["a made-up cursor", '{ allCoinflips(after: "garbage") { totalCount } }', {}, "allCoinflips", "Invalid cursor, please enter a cursor from a previous request, or null."],
    ["offset with last", "{ allCoinflips(last: 1, offset: 1) { totalCount } }", {}, "allCoinflips", "Cannot use 'offset' with 'last'"],
  ];
  for (const [name, query, variables, field, message] of cases) {
    t.test(name, async (t) => oneFieldError(t, await gql(hub.url, query, variables, player.header), field, message, "BAD_USER_INPUT"));
  }
  const nul = await gql(hub.url, 'mutation { makeCoinflipBet(input: { wager: 2, currency: "HO\\u0000USE", side: HEADS }) { balance } }', {}, player.header);
  t.equal(nul.status, 400);
  t.same(nul.body.errors?.map((e) => [e.message, e.extensions?.code]), [
    ['The value of argument "input" (at input.currency) of field "makeCoinflipBet" contains a NUL character (\\u0000), which the database cannot store.', "BAD_USER_INPUT"],
  ]);
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
