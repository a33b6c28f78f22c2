/**
 * The five scenarios of issue 6. Each has a full check (one request, the JSON
 * parsed and asserted) run on both targets before the scenario is timed, and
 * a quick check run on EVERY response of every timed run (autocannon's
 * verifyBody; failures are the "bad body" column). The quick check matters
 * because a GraphQL error is an HTTP 200: counting non-2xx alone would hide it.
 */
import type { Fixtures } from "./seed.js";

export interface HttpRequest {
  method: "GET" | "POST";
  path: string;
  headers: Record<string, string>;
  body?: string;
  /** Authorization headers taken in turn, one per request (instead of headers.authorization). */
  authorizations?: string[];
}

export interface Scenario {
  id: string;
  title: string;
  /** Target ratio hub/baseline of req/s. */
  targetRatio: number;
  /**
   * Also measured on bare Fastify + grafserv with the same preset
   * (bench/bare/server.ts), with this target for hub/bare: what the hub's own
   * front (hooks, request ids, counters, logging) costs a request.
   */
  bareTargetRatio?: number;
  request(f: Fixtures): HttpRequest;
  /** undefined when the answer is right, else what is wrong. */
  check(status: number, body: string, f: Fixtures): string | undefined;
  quick(body: string): boolean;
}

const JSON_HEADERS = { "content-type": "application/json" };

const ROWS_QUERY = `query TenCoinflips {
  allCoinflips(first: 10, orderBy: ID_ASC) {
    nodes { id wager net currencyKey userId casinoId experienceId }
  }
}`;

const MUTATION = `mutation Flip($input: MakeCoinflipInput!) {
  makeCoinflip(input: $input) { id wager net currencyKey userId }
}`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

type GraphQLBody = { data?: Record<string, any> | null; errors?: { message: string }[] };

function parse(status: number, body: string): { value?: GraphQLBody; problem?: string } {
  if (status !== 200) return { problem: `HTTP ${status}: ${body.slice(0, 300)}` };
  try {
    const value = JSON.parse(body) as GraphQLBody;
    if (value.errors?.length) return { problem: `GraphQL errors: ${JSON.stringify(value.errors).slice(0, 300)}` };
    if (!value.data) return { problem: `no data: ${body.slice(0, 300)}` };
    return { value };
  } catch {
    return { problem: `not JSON: ${body.slice(0, 300)}` };
  }
}

function count(haystack: string, needle: string): number {
  let n = 0;
  for (let i = haystack.indexOf(needle); i !== -1; i = haystack.indexOf(needle, i + needle.length)) n++;
  return n;
}

function checkRows(status: number, body: string, f: Fixtures, ownerId: string): string | undefined {
  const { value, problem } = parse(status, body);
  if (problem) return problem;
  const nodes = value!.data!.allCoinflips?.nodes as { id: string; userId: string; currencyKey: string }[] | undefined;
  if (!Array.isArray(nodes)) return `no allCoinflips.nodes: ${body.slice(0, 300)}`;
  if (nodes.length !== 10) return `expected 10 rows, got ${nodes.length}`;
  const ids = nodes.map((n) => n.id);
  if (JSON.stringify(ids) !== JSON.stringify(f.readerRowIds)) return `rows are not the 10 seeded ones: ${ids.join(",")}`;
  if (nodes.some((n) => n.userId !== ownerId || n.currencyKey !== f.currency)) return "a row has the wrong owner or currency";
  return undefined;
}

const quickRows = (body: string) =>
  body.startsWith('{"data":{"allCoinflips":{"nodes":[{') && !body.includes('"errors"') && count(body, '"id":') === 10;

export const scenarios: Scenario[] = [
  {
    id: "typename",
    title: "POST /graphql {__typename}",
    targetRatio: 2.0,
    bareTargetRatio: 0.95,
    request: () => ({ method: "POST", path: "/graphql", headers: JSON_HEADERS, body: JSON.stringify({ query: "{__typename}" }) }),
    check(status, body) {
      const { value, problem } = parse(status, body);
      if (problem) return problem;
      return value!.data!.__typename === "Query" ? undefined : `unexpected body ${body}`;
    },
    quick: (body) => body === '{"data":{"__typename":"Query"}}',
  },
  {
    id: "rows10",
    title: "10 rows of app.coinflip (operator API key)",
    targetRatio: 1.3,
    request: (f) => ({
      method: "POST",
      path: "/graphql",
      headers: { ...JSON_HEADERS, authorization: `apikey:${f.operatorKey}` },
      body: JSON.stringify({ query: ROWS_QUERY }),
    }),
    check: (status, body, f) => checkRows(status, body, f, f.reader.userId),
    quick: quickRows,
  },
  {
    id: "rows10-session",
    title: "10 rows of app.coinflip (player session, RLS)",
    targetRatio: 1.3,
    request: (f) => ({
      method: "POST",
      path: "/graphql",
      headers: { ...JSON_HEADERS, authorization: `session:${f.reader.token}` },
      body: JSON.stringify({ query: ROWS_QUERY }),
    }),
    check: (status, body, f) => checkRows(status, body, f, f.reader.userId),
    quick: quickRows,
  },
  {
    id: "makeCoinflip",
    title: "makeCoinflip mutation (player sessions, one per connection)",
    targetRatio: 1.3,
    request: (f) => ({
      method: "POST",
      path: "/graphql",
      headers: { ...JSON_HEADERS, authorization: `session:${f.writer.token}` },
      authorizations: f.writers.map((w) => `session:${w.token}`),
      body: JSON.stringify({ query: MUTATION, variables: { input: { currency: f.currency, wager: 1 } } }),
    }),
    check(status, body, f) {
      const { value, problem } = parse(status, body);
      if (problem) return problem;
      const flip = value!.data!.makeCoinflip as { id: string; wager: number; net: number; currencyKey: string; userId: string } | null;
      if (!flip) return `makeCoinflip returned null: ${body}`;
      if (!UUID.test(flip.id)) return `bad id ${flip.id}`;
      if (flip.wager !== 1 || (flip.net !== 0.99 && flip.net !== -1)) return `bad wager/net ${flip.wager}/${flip.net}`;
      if (!f.writers.some((w) => w.userId === flip.userId) || flip.currencyKey !== f.currency) return "the bet belongs to the wrong player or currency";
      return undefined;
    },
    quick: (body) => body.startsWith('{"data":{"makeCoinflip":{"id":"') && !body.includes('"errors"'),
  },
  {
    id: "health",
    title: "GET /health (Express route via configureApp)",
    targetRatio: 1.3,
    request: () => ({ method: "GET", path: "/health", headers: {} }),
    check: (status, body) => (status === 200 && body === '{"status":"ok"}' ? undefined : `HTTP ${status}: ${body.slice(0, 300)}`),
    quick: (body) => body === '{"status":"ok"}',
  },
];

/** One request with fetch, for the checks. */
export async function fetchOnce(baseUrl: string, req: HttpRequest): Promise<{ status: number; body: string }> {
  const res = await fetch(`${baseUrl}${req.path}`, { method: req.method, headers: req.headers, ...(req.body !== undefined ? { body: req.body } : {}) });
  return { status: res.status, body: await res.text() };
}
