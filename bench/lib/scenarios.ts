/**
 * The five scenarios of issue 6. Each has a full check (one request, the JSON
 * parsed and asserted) run on both targets before the scenario is timed, and
 * a quick check run on EVERY response of every timed run (autocannon's
 * verifyBody; failures are the "bad body" column). The quick check matters
 * because a GraphQL error is an HTTP 200: counting non-2xx alone would hide it.
 */
import { CROWD, type Bettor, type Fixtures } from "./seed.js";

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
  /** Needs the outcome bet players (seedFair). */
  fair?: boolean;
  /** Connections of its runs when not --connections (one per player for the crowd scenarios). */
  connections?: number;
  /** The request of the i-th connection, when each connection is another player. */
  perConnection?(f: Fixtures, index: number): HttpRequest;
  /** Sample the database's lock waits during the timed rounds. */
  sampleLocks?: boolean;
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

const OUTCOME_BET = `mutation Bet($i: HubMakeOutcomeBetInput!) {
  hubMakeOutcomeBet(input: $i) { result { __typename ... on HubMakeOutcomeBetSuccess { bet { id outcomeIdx net userId } } ... on HubBadHashChainError { message } ... on HubRiskError { message } } }
}`;
// A coin with the house's 1%: win 0.98 × wager or lose the wager.
const COIN_OUTCOMES = [{ weight: 1, profit: 0.98 }, { weight: 1, profit: -1 }];

function outcomeBetRequest(b: Bettor, currency: string): HttpRequest {
  return {
    method: "POST",
    path: "/graphql",
    headers: { ...JSON_HEADERS, authorization: `session:${b.token}` },
    body: JSON.stringify({
      query: OUTCOME_BET,
      variables: { i: { kind: "GENERAL", wager: 100, currency, outcomes: COIN_OUTCOMES, hashChainId: b.hashChainId, clientSeed: "bench" } },
    }),
  };
}

function checkOutcomeBet(status: number, body: string, b: Bettor): string | undefined {
  const { value, problem } = parse(status, body);
  if (problem) return problem;
  const result = value!.data!.hubMakeOutcomeBet?.result as { __typename: string; message?: string; bet?: { id: string; outcomeIdx: number; net: number; userId: string } } | undefined;
  if (result?.__typename !== "HubMakeOutcomeBetSuccess") return `not a success: ${body.slice(0, 300)}`;
  const bet = result.bet!;
  if (!UUID.test(bet.id)) return `bad id ${bet.id}`;
  if (!((bet.outcomeIdx === 0 && bet.net === 98) || (bet.outcomeIdx === 1 && bet.net === -100))) return `bad outcome/net ${bet.outcomeIdx}/${bet.net}`;
  if (bet.userId !== b.userId) return "the bet belongs to another player";
  return undefined;
}

const quickOutcomeBet = (body: string) => body.startsWith('{"data":{"hubMakeOutcomeBet":{"result":{"__typename":"HubMakeOutcomeBetSuccess","bet":{"id":"') && !body.includes('"errors"');

const COINFLIP_BET = `mutation FlipBet($i: MakeCoinflipBetInput!) { makeCoinflipBet(input: $i) { bet { id net userId } outcome balance } }`;

function coinflipBetRequest(b: Bettor, currency: string): HttpRequest {
  return {
    method: "POST",
    path: "/graphql",
    headers: { ...JSON_HEADERS, authorization: `session:${b.token}` },
    body: JSON.stringify({ query: COINFLIP_BET, variables: { i: { wager: 100, currency, side: "HEADS" } } }),
  };
}

const crowd = (f: Fixtures, i: number) => f.fair!.crowd[i % f.fair!.crowd.length]!;

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
    id: "outcomeBet",
    title: "hubMakeOutcomeBet, one player (one chain, one balance, one bankroll)",
    targetRatio: 1.0,
    fair: true,
    sampleLocks: true,
    request: (f) => outcomeBetRequest(f.fair!.bettor, f.currency),
    check: (status, body, f) => checkOutcomeBet(status, body, f.fair!.bettor),
    quick: quickOutcomeBet,
  },
  {
    id: "outcomeBet50",
    title: `hubMakeOutcomeBet, ${CROWD} players at once, one house bankroll row`,
    targetRatio: 1.0,
    fair: true,
    sampleLocks: true,
    connections: CROWD,
    request: (f) => outcomeBetRequest(crowd(f, 0), f.currency),
    perConnection: (f, i) => outcomeBetRequest(crowd(f, i), f.currency),
    check: (status, body, f) => checkOutcomeBet(status, body, crowd(f, 0)),
    quick: quickOutcomeBet,
  },
  {
    id: "outcomeBet50x50",
    title: `hubMakeOutcomeBet, ${CROWD} players at once, each in its own currency (${CROWD} bankroll rows)`,
    targetRatio: 1.0,
    fair: true,
    sampleLocks: true,
    connections: CROWD,
    request: (f) => outcomeBetRequest(crowd(f, 0), crowd(f, 0).ownCurrency),
    perConnection: (f, i) => outcomeBetRequest(crowd(f, i), crowd(f, i).ownCurrency),
    check: (status, body, f) => checkOutcomeBet(status, body, crowd(f, 0)),
    quick: quickOutcomeBet,
  },
  {
    id: "makeCoinflipBet50",
    title: `makeCoinflipBet (no hash chain), ${CROWD} players at once, one house bankroll row`,
    targetRatio: 1.0,
    fair: true,
    sampleLocks: true,
    connections: CROWD,
    request: (f) => coinflipBetRequest(crowd(f, 0), f.currency),
    perConnection: (f, i) => coinflipBetRequest(crowd(f, i), f.currency),
    check(status, body, f) {
      const { value, problem } = parse(status, body);
      if (problem) return problem;
      const r = value!.data!.makeCoinflipBet as { bet: { id: string; net: number; userId: string }; outcome: string } | null;
      if (!r || !UUID.test(r.bet.id)) return `no bet: ${body.slice(0, 300)}`;
      if (r.bet.net !== 99 && r.bet.net !== -100) return `bad net ${r.bet.net}`;
      return r.bet.userId === crowd(f, 0).userId ? undefined : "the bet belongs to another player";
    },
    quick: (body) => body.startsWith('{"data":{"makeCoinflipBet":{"bet":{"id":"') && !body.includes('"errors"'),
  },
  {
    id: "makeCoinflipBet50x50",
    title: `makeCoinflipBet (no hash chain), ${CROWD} players at once, each in its own currency (${CROWD} bankroll rows)`,
    targetRatio: 1.0,
    fair: true,
    sampleLocks: true,
    connections: CROWD,
    request: (f) => coinflipBetRequest(crowd(f, 0), crowd(f, 0).ownCurrency),
    perConnection: (f, i) => coinflipBetRequest(crowd(f, i), crowd(f, i).ownCurrency),
    check(status, body, f) {
      const { value, problem } = parse(status, body);
      if (problem) return problem;
      const r = value!.data!.makeCoinflipBet as { bet: { id: string; net: number; userId: string }; outcome: string } | null;
      if (!r || !UUID.test(r.bet.id)) return `no bet: ${body.slice(0, 300)}`;
      if (r.bet.net !== 99 && r.bet.net !== -100) return `bad net ${r.bet.net}`;
      return r.bet.userId === crowd(f, 0).userId ? undefined : "the bet belongs to another player";
    },
    quick: (body) => body.startsWith('{"data":{"makeCoinflipBet":{"bet":{"id":"') && !body.includes('"errors"'),
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
