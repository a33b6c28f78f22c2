/**
 * `@hubpkg/hub/test`: start a throw-away hub in a test and set up the rows a
 * plugin test needs (README: Testing plugins).
 *
 * Each test server gets its own database, copied from a template that holds
 * the core migrations, on a Postgres cluster shared by all test processes of
 * this user (see test-kit-cluster.ts for how it starts, is shared and ends);
 * the server's user migrations run on its copy. Nothing is mocked: requests go
 * over real HTTP to a real server on a real Postgres.
 *
 * The helpers take the argument names of the system the hub reimplements, so
 * existing plugin tests port by changing the import. They write through the
 * same paths as production code: balances and bankrolls are created through
 * hub_hidden.credit_balance / adjust_bankroll, so hub.ledger records them
 * (actor "test-kit") and always sums to the amounts.
 */
import "../prelude.js";
import { print, type DocumentNode } from "graphql";
import pg from "pg";
import { createApiKey, createSession, USER_COLUMNS } from "../auth/credentials.js";
import { endPool, newPool } from "../db/database.js";
import type { DbBalance, DbBankroll, DbCasino, DbCurrency, DbExperience, DbUser } from "../db/types.js";
import { argumentOutOfRange, HubError, invalidArgument } from "../errors.js";
import { createLogger } from "../logger.js";
import { validateOptions, type ServerOptions } from "../options.js";
import { FASTIFY_APP, SERVER_STATE, startServer } from "../start.js";
import { serverStarted, serverStopped } from "../exports/current-server.js";
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from "fastify";
import { acquireCluster, dropDatabase, forgetCluster, spareReady, takeDatabase } from "./cluster.js";
import { connectionLoss } from "../db/error-class.js";

// ------------------------------------------------------------- GraphQL client

/** What the server answered, as graphql-request's ClientError carries it. */
export interface GraphQLResponse<T = unknown> {
  data?: T | null;
  errors?: { message: string; path?: (string | number)[]; extensions?: Record<string, unknown> }[];
  extensions?: Record<string, unknown>;
  status: number;
  headers: Headers;
}

/** Rejection of GraphQLClient.request: the server answered errors (or not JSON, or not 2xx). */
export class ClientError extends Error {
  readonly response: GraphQLResponse;
  readonly request: { query: string; variables: Record<string, unknown> | undefined };
  constructor(message: string, response: GraphQLResponse, request: ClientError["request"]) {
    super(message);
    this.name = "ClientError";
    this.response = response;
    this.request = request;
  }
}

export interface GraphQLClient {
  /**
   * POST /graphql; resolves to `data`, rejects with a ClientError whose
   * message holds the GraphQL error messages (like graphql-request).
   */
  request<T = any, V extends Record<string, unknown> = Record<string, unknown>>(query: string | DocumentNode, variables?: V): Promise<T>;
}

/** A client for `url` (the server's base URL) sending these headers, e.g. `{ authorization: "apikey:…" }`. */
export function createGraphQLClient(url: string, headers: Record<string, string> = {}): GraphQLClient {
  const endpoint = `${url.replace(/\/+$/, "")}/graphql`;
  return {
    async request(document, variables) {
      const query = typeof document === "string" ? document : print(document);
      const request = { query, variables };
      const res = await fetch(endpoint, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json", ...headers },
        body: JSON.stringify({ query, variables }),
      });
      const text = await res.text();
      let body: Omit<GraphQLResponse, "status" | "headers">;
      try {
        body = JSON.parse(text) as typeof body;
      } catch {
        throw new ClientError(`POST /graphql answered HTTP ${res.status} with a body that is not JSON: ${text.slice(0, 300)}`, {
          status: res.status,
          headers: res.headers,
        }, request);
      }
      const response: GraphQLResponse = { ...body, status: res.status, headers: res.headers };
      if (body.errors?.length) {
        throw new ClientError(`GraphQL error: ${body.errors.map((e) => e.message).join("; ")} (HTTP ${res.status})`, response, request);
      }
      if (!res.ok || body.data === undefined) {
        throw new ClientError(`POST /graphql answered HTTP ${res.status} without data: ${text.slice(0, 300)}`, response, request);
      }
      return body.data as any;
    },
  };
}

// ------------------------------------------------------------- the server

export type TestServerOptions = ServerOptions;

export interface TestServer {
  /** http://127.0.0.1:<port> */
  url: string;
  port: number;
  /** Superuser connection to this server's database (bypasses row-level security). */
  dbPool: pg.Pool;
  /** The casino created by the core migrations, with the currency HOUSE. */
  playgroundCasinoId: string;
  /** A new session for the user in the experience; the client sends it. */
  authenticate(userId: string, experienceId: string): Promise<{ token: string; graphqlClient: GraphQLClient }>;
  /** A new operator API key; the client sends it. */
  authenticateOperator(): Promise<{ apiKey: string; apiKeyId: string; graphqlClient: GraphQLClient }>;
  /** A client without credentials. */
  graphqlClient: GraphQLClient;
  /** Connection string of dbPool. */
  /** The GraphQL (authenticator) connection of this server's database: start another hub on the same database with it. */
  databaseUrl: string;
  superuserDatabaseUrl: string;
  /** The server's Fastify instance (listening): add nothing to it; read it, or use inject(). */
  app: FastifyInstance;
  /** A request answered by the server without a socket (Fastify's inject(); the hub's hooks and routes run as over HTTP). */
  inject(request: InjectOptions | string): Promise<LightMyRequestResponse>;
  /** Stop the server, then drop its database. Safe to call twice. */
  stop(): Promise<void>;
}

const isConnectionLost = (error: unknown) => connectionLoss(error) !== undefined;

/**
 * Start a hub on a throw-away database. Same options as startAndListen, with
 * test defaults: port 0, logLevel "warn", playground on,
 * drainMs 0, socketRebalance off.
 * `databaseUrl` + `superuserDatabaseUrl` choose a Postgres server to create
 * the databases on (default: the shared embedded cluster); `dataDir` where the
 * shared cluster lives (default: os.tmpdir()/hub-test-kit-<uid>-<tag of the Postgres binaries>).
 */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const { dataDir, databaseUrl, superuserDatabaseUrl, ...serverOptions } = options;
  if ((databaseUrl === undefined) !== (superuserDatabaseUrl === undefined)) {
    throw new HubError("HUB_OPTION_INVALID", "startTestServer: give both databaseUrl and superuserDatabaseUrl (a server to create test databases on), or neither (the shared embedded cluster).");
  }
  // A mistaken option is refused before a database is copied for it (startServer checks them again).
  validateOptions(serverOptions);
  const logLevel = options.logLevel ?? "warn";
  const log = createLogger({ level: logLevel, pretty: false, fd: 2 });

  let clusterPromise = acquireCluster({ dataDir, databaseUrl, superuserDatabaseUrl, log });
  let cluster = await clusterPromise;
  let database: string;
  try {
    database = await takeDatabase(cluster);
  } catch (error) {
    if (!isConnectionLost(error)) throw error;
    // The shared cluster was stopped between two test files: start it again.
    forgetCluster(clusterPromise);
    clusterPromise = acquireCluster({ dataDir, databaseUrl, superuserDatabaseUrl, log });
    cluster = await clusterPromise;
    database = await takeDatabase(cluster);
  }
  const superuserUrl = cluster.superuserUrlFor(database);

  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  let dbPool: pg.Pool | undefined;
  try {
    // A test database is a throw-away embedded one, where the playground is on
    // by default (README): unless the options or HUB_PLAYGROUND say otherwise.
    const playground = options.playground ?? (["on", "off"].includes(process.env.HUB_PLAYGROUND ?? "") ? undefined : true);
    server = await startServer({
      ...serverOptions,
      port: options.port ?? 0,
      // A test's stop() should not wait for a proxy that is not there, nor its sockets move.
      drainMs: options.drainMs ?? 0,
      socketRebalance: options.socketRebalance ?? false,
      logLevel,
      databaseUrl: cluster.authenticatorUrlFor(database),
      superuserDatabaseUrl: superuserUrl,
      ...(playground !== undefined ? { playground } : {}),
    }, undefined, { registry: { started: serverStarted, stopped: serverStopped } });
    dbPool = newPool({ connectionString: superuserUrl, max: 5, application_name: "hub:test-kit" });
    // The database is dropped at stop(): idle clients then see their backend end.
    dbPool.on("error", () => undefined);
    const { rows } = await dbPool.query<{ id: string }>("select id from hub.casino where is_playground order by id limit 1");
    if (!rows[0]) throw new Error("startTestServer: the playground casino is missing from the new database.");
    const playgroundCasinoId = rows[0].id;
    const pool = dbPool;
    const running = server;
    const url = running.url;
    const app = (running as unknown as { [FASTIFY_APP]: FastifyInstance })[FASTIFY_APP];

    await spareReady(cluster);
    let stopping: Promise<void> | undefined;
    const testServer: TestServer = {
      url,
      port: running.port,
      dbPool: pool,
      playgroundCasinoId,
      superuserDatabaseUrl: superuserUrl,
      databaseUrl: cluster.authenticatorUrlFor(database),
      graphqlClient: createGraphQLClient(url),
      app,
      inject: (request) => app.inject(request as InjectOptions),
      async authenticate(userId, experienceId) {
        const { rows } = await pool.query<{ casino_id: string }>("select casino_id from hub.user where id = $1", [userId]);
        if (!rows[0]) throw invalidArgument(`authenticate: no user has the id ${JSON.stringify(userId)}; create one with createPlayer(dbPool, { casinoId, uname }).`);
        const { token } = await createSession(pool, { userId, casinoId: rows[0].casino_id, experienceId });
        return { token, graphqlClient: createGraphQLClient(url, { authorization: `session:${token}` }) };
      },
      async authenticateOperator() {
        const { key, id } = await createApiKey(pool);
        return { apiKey: key, apiKeyId: id, graphqlClient: createGraphQLClient(url, { authorization: `apikey:${key}` }) };
      },
      stop() {
        stopping ??= (async () => {
          try {
            await running.stop();
          } finally {
            await endPool(pool).catch(() => undefined);
            await dropDatabase(cluster, database).catch((error: unknown) => log.warn({ err: error, database }, "test kit: could not drop the test database"));
          }
        })();
        return stopping;
      },
    };
    // The server's own state, for the hub's tests of what servers share (not part of TestServer's shape).
    Object.defineProperty(testServer, SERVER_STATE, { value: (running as { [SERVER_STATE]?: unknown })[SERVER_STATE] });
    return testServer;
  } catch (error) {
    await server?.stop().catch(() => undefined);
    if (dbPool) await endPool(dbPool).catch(() => undefined);
    await dropDatabase(cluster, database).catch(() => undefined);
    await spareReady(cluster);
    throw error;
  }
}

// ------------------------------------------------------------- helpers

/** A pg.Pool, pg.Client or pool client: each helper is a statement or two. */
type Queryable = Pick<pg.Pool, "query">;

const ACTOR = "test-kit";

function testName(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 10)}`;
}

function checkAmount(fn: string, amount: unknown): number {
  // Amounts are whole base units of the currency, as the ledger functions require.
  if (typeof amount !== "number" || !Number.isSafeInteger(amount) || amount < 0) {
    throw argumentOutOfRange(`${fn}: amount must be a whole number of base units ≥ 0 (at most ${Number.MAX_SAFE_INTEGER}); received ${String(amount)}.`);
  }
  return amount;
}

export async function createCasino(pool: Queryable, input: { name: string; baseUrl?: string | null }): Promise<DbCasino> {
  const { rows } = await pool.query<DbCasino>("insert into hub.casino (name, base_url) values ($1, $2) returning *", [input.name, input.baseUrl ?? null]);
  return rows[0]!;
}

/** A currency of a casino (balances and bankrolls need one). Default display: the key, scale 1. */
export async function createCurrency(
  pool: Queryable,
  input: { casinoId: string; key: string; displayUnitName?: string; displayUnitScale?: number },
): Promise<DbCurrency> {
  const { rows } = await pool.query<DbCurrency>(
    "insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale) values ($1, $2, $3, $4) returning *",
    [input.key, input.casinoId, input.displayUnitName ?? input.key, input.displayUnitScale ?? 1],
  );
  return rows[0]!;
}

/** An experience of the casino; the name defaults to a unique one. */
export async function createExperience(pool: Queryable, input: { casinoId: string; name?: string }): Promise<DbExperience> {
  const { rows } = await pool.query<DbExperience>("insert into hub.experience (casino_id, name) values ($1, $2) returning *", [
    input.casinoId,
    input.name ?? testName("experience"),
  ]);
  return rows[0]!;
}

export async function createPlayer(pool: Queryable, input: { casinoId: string; uname: string }): Promise<DbUser> {
  const { rows } = await pool.query<DbUser>(`insert into hub.user (casino_id, uname) values ($1, $2) returning ${USER_COLUMNS}`, [input.casinoId, input.uname]);
  return rows[0]!;
}

async function requireCurrency(pool: Queryable, fn: string, casinoId: string, currencyKey: string): Promise<void> {
  const { rows } = await pool.query<{ key: string }>("select key from hub.currency where casino_id = $1 order by key", [casinoId]);
  if (!rows.some((r) => r.key === currencyKey)) {
    throw invalidArgument(
      `${fn}: casino ${casinoId} has no currency ${JSON.stringify(currencyKey)} (it has ${rows.length ? rows.map((r) => JSON.stringify(r.key)).join(", ") : "none"}); ` +
        `create it first with createCurrency(pool, { casinoId, key: ${JSON.stringify(currencyKey)} }).`,
    );
  }
}

/**
 * Make the player's balance in a currency of the user's casino hold `amount`,
 * recorded in the ledger (the difference is credited or debited): a test may
 * call it again for the same player, as the other revision's tests do, to set
 * the balance anew. The currency must exist (the playground casino has HOUSE;
 * others: createCurrency).
 */
export async function createPlayerBalance(
  pool: Queryable,
  input: { userId: string; experienceId: string; currencyKey: string; amount: number },
): Promise<DbBalance> {
  const fn = "createPlayerBalance";
  const amount = checkAmount(fn, input.amount);
  const { rows: users } = await pool.query<{ casino_id: string }>("select casino_id from hub.user where id = $1", [input.userId]);
  const casinoId = users[0]?.casino_id;
  if (!casinoId) throw invalidArgument(`${fn}: no user has the id ${JSON.stringify(input.userId)}.`);
  await requireCurrency(pool, fn, casinoId, input.currencyKey);
  const delta = amount - ((await getPlayerBalance(pool, input))?.amount ?? 0);
  const args = [input.userId, casinoId, input.experienceId, input.currencyKey, Math.abs(delta), ACTOR, fn];
  const { rows } = delta > 0
    ? await pool.query<DbBalance>("select * from hub_hidden.credit_balance($1, $2, $3, $4, $5, $6, $7)", args)
    : delta < 0
      ? await pool.query<DbBalance>("select * from hub_hidden.debit_balance($1, $2, $3, $4, $5, $6, $7)", args)
      : await pool.query<DbBalance>(
          `with added as (
             insert into hub.balance (user_id, casino_id, experience_id, currency_key, amount)
             select $1, $2, e.id, $4, 0 from hub.experience e where e.id = $3 and e.casino_id = $2
             on conflict (user_id, experience_id, currency_key) do nothing returning *)
           select * from added
           union all
           select b.* from hub.balance b where b.user_id = $1 and b.experience_id = $3 and b.currency_key = $4 and b.casino_id = $2`,
          [input.userId, casinoId, input.experienceId, input.currencyKey],
        );
  if (!rows[0]) throw invalidArgument(`${fn}: no experience ${input.experienceId} in the casino ${casinoId} of user ${input.userId}.`);
  return rows[0];
}

/** The player's balance row (with `amount`), or null when there is none. */
export async function getPlayerBalance(
  pool: Queryable,
  input: { userId: string; experienceId: string; currencyKey: string },
): Promise<DbBalance | null> {
  const { rows } = await pool.query<DbBalance>(
    "select * from hub.balance where user_id = $1 and experience_id = $2 and currency_key = $3",
    [input.userId, input.experienceId, input.currencyKey],
  );
  return rows[0] ?? null;
}

/**
 * Make the casino's house bankroll in a currency hold `amount`, recorded in
 * the ledger (the difference is added or taken): tests that share a casino may
 * each set the bankroll they need, as the other revision's tests do (one sets
 * a small bankroll to provoke a risk refusal after others funded a large one).
 */
export async function createHouseBankroll(
  pool: Queryable,
  input: { casinoId: string; currencyKey: string; amount: number },
): Promise<DbBankroll> {
  const fn = "createHouseBankroll";
  const amount = checkAmount(fn, input.amount);
  await requireCurrency(pool, fn, input.casinoId, input.currencyKey);
  const delta = amount - ((await getHouseBankroll(pool, input))?.amount ?? 0);
  // adjust_bankroll moves at least one unit; ensure_bankroll opens an empty bankroll or returns the one there is.
  const { rows } = delta !== 0
    ? await pool.query<DbBankroll>("select * from hub_hidden.adjust_bankroll($1, $2, $3, $4, $5)", [input.casinoId, input.currencyKey, delta, ACTOR, fn])
    : await pool.query<DbBankroll>("select * from hub_hidden.ensure_bankroll($1, $2, $3, $4, $5)", [input.casinoId, input.currencyKey, amount, fn, ACTOR]);
  return rows[0]!;
}

/** The casino's house bankroll row, or null when there is none. */
export async function getHouseBankroll(pool: Queryable, input: { casinoId: string; currencyKey: string }): Promise<DbBankroll | null> {
  const { rows } = await pool.query<DbBankroll>("select * from hub.bankroll where casino_id = $1 and currency_key = $2", [input.casinoId, input.currencyKey]);
  return rows[0] ?? null;
}
