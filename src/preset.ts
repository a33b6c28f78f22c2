import { makePgService } from "postgraphile/adaptors/pg";
import { PostGraphileAmberPreset } from "postgraphile/presets/amber";
import type pg from "pg";
import type {} from "grafserv/node"; // declares requestContext.node
import type {} from "grafserv/fastify/v5"; // declares requestContext.fastifyv5
import { GraphQLError } from "graphql";
import { isPromiseLike, isSafeError } from "grafast";
import { randomBytes } from "node:crypto";
import type { Identity } from "./identity.js";
import { pgSettingsFor } from "./identity.js";
import { HubInflectionPlugin } from "./inflection.js";
import type { Logger } from "./logger.js";
import type { PluginContext } from "./context.js";
import { queryLimitRules, type QueryLimits } from "./query-limits.js";
import { makeParseAndValidatePlugin } from "./parse-cache.js";
import { makePipelinedPgService } from "./db/pipelined-adaptor.js";
import { ClientInputPlugin, maskClientInputError } from "./mask-error.js";
import { isPoolSaturated } from "./db/pools.js";
import { ErrorCode } from "./errors.js";

/** A pool in node-postgres's pipeline mode gets the pipelined adaptor (src/db/pools.ts). */
const isPipelined = (pool: pg.Pool) => (pool.options as { pipeline?: boolean }).pipeline === true;

export interface PresetInput {
  plugins: GraphileConfig.Plugin[];
  extraPgSchemas: string[];
  graphqlPool: pg.Pool;
  superuserPool: pg.Pool;
  /** The superuser pool a request's plugins get (default: superuserPool itself); start.ts bounds it per identity. */
  superuserPoolFor?: (identity: Identity | undefined) => pg.Pool;
  graphiql: boolean;
  log: Logger;
  /** Largest accepted /graphql body in bytes. */
  maxRequestLength: number;
  limits: QueryLimits;
  /** statement_timeout for GraphQL requests, ms (0 = none). */
  statementTimeoutMs: number;
}

/** Where the auth hook leaves the identity: on the raw Node request, which Express and grafserv both see. */
export interface RequestWithIdentity {
  identity?: Identity | undefined;
  id?: string;
}

/** Where the request id travels from execution to masking, on the error object itself. */
const REQUEST_ID = Symbol("hub.requestId");

/**
 * maskError sees only the error; this middleware stamps each error of a result
 * with its request's id (from the GraphQL context) so the log line of a masked
 * error names the request. It touches nothing on successful results.
 */
const ErrorRequestIdPlugin: GraphileConfig.Plugin = {
  name: "HubErrorRequestIdPlugin",
  version: "0.1.0",
  grafast: {
    middleware: {
      execute(next, event) {
        const requestId = (event.args.contextValue as Partial<PluginContext> | undefined)?.requestId;
        const stamp = <R>(result: R): R => {
          const errors = (result as { errors?: readonly object[] } | null)?.errors;
          if (errors) for (const error of errors) Object.defineProperty(error, REQUEST_ID, { value: requestId, configurable: true });
          return result;
        };
        const result = next();
        return isPromiseLike(result) ? result.then(stamp) : stamp(result);
      },
    },
  },
};

/**
 * Errors a plugin throws on purpose (GraphQLError, grafast SafeError) reach the
 * client as they are; anything else is an internal failure: the client gets an
 * id, the log gets the error with the same id (never `console`).
 */
export function makeMaskError(log: Logger) {
  return (error: GraphQLError): GraphQLError => {
    const original = error.originalError;
    if (!original && error instanceof GraphQLError) return error;
    if (original instanceof GraphQLError) return error;
    if (original != null && isSafeError(original)) {
      return new GraphQLError(original.message, {
        nodes: error.nodes,
        source: error.source,
        positions: error.positions,
        path: error.path,
        originalError: original,
        extensions: (original as { extensions?: Record<string, unknown> }).extensions ?? null,
      });
    }
    const reqId = (error as { [REQUEST_ID]?: string })[REQUEST_ID];
    const refused = maskClientInputError(error, original, log, reqId);
    if (refused) return refused;
    const errorId = randomBytes(6).toString("hex");
    // Failures a client should treat differently from a bug: say what they are
    // (and nothing more), so clients can retry an outage or shrink a query.
    const known = classifyDatabaseError(original);
    // A saturated pool or a query cut by the statement timeout is load, not a
    // fault of the server's code: worth a warning, not an error-level alert.
    const level = known?.code === ErrorCode.SERVER_BUSY || known?.code === ErrorCode.STATEMENT_TIMEOUT ? "warn" : "error";
    log[level]({ errorId, reqId, err: original ?? error, path: error.path, code: known?.code }, "masked GraphQL error");
    if (known) {
      return new GraphQLError(known.message, {
        nodes: error.nodes,
        source: error.source,
        positions: error.positions,
        path: error.path,
        originalError: original,
        extensions: { errorId, code: known.code },
      });
    }
    return new GraphQLError(`Internal error (reference ${errorId}); the server log has the details.`, {
      nodes: error.nodes,
      source: error.source,
      positions: error.positions,
      path: error.path,
      originalError: original,
      extensions: { errorId, code: ErrorCode.INTERNAL_SERVER_ERROR },
    });
  };
}

/** Connection-level failures (Postgres stopped, restarting, unreachable) and statement timeouts. */
export function classifyDatabaseError(error: unknown): { code: string; message: string } | undefined {
  const e = error as { code?: unknown; message?: unknown } | null | undefined;
  if (!e || typeof e !== "object") return undefined;
  const code = typeof e.code === "string" ? e.code : "";
  const message = typeof e.message === "string" ? e.message : "";
  if (code === "57014" && /statement timeout/.test(message)) {
    return { code: ErrorCode.STATEMENT_TIMEOUT, message: "The query took longer than the server's statement timeout and was cancelled." };
  }
  // Every pooled connection stayed in use for the whole connection timeout: busy, not down.
  if (isPoolSaturated(error)) {
    return { code: ErrorCode.SERVER_BUSY, message: "The server is busy: every database connection stayed in use; retry shortly." };
  }
  if (
    ["57P01", "57P02", "57P03", "53300", "ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT"].includes(code) ||
    code.startsWith("08") ||
    /Connection terminated|not queryable|Client has encountered a connection error/i.test(message)
  ) {
    return { code: ErrorCode.DATABASE_UNAVAILABLE, message: "The database is unavailable; retry shortly." };
  }
  return undefined;
}

export function makePreset(input: PresetInput): GraphileConfig.Preset {
  const { superuserPool, statementTimeoutMs } = input;
  const superuserPoolFor = input.superuserPoolFor ?? (() => superuserPool);
  return {
    extends: [PostGraphileAmberPreset],
    // No Relay global ids: `id` is the row's UUID, as in the original.
    disablePlugins: ["NodePlugin"],
    plugins: [
      HubInflectionPlugin,
      ErrorRequestIdPlugin,
      makeParseAndValidatePlugin({ firstRules: queryLimitRules(input.limits) }),
      ClientInputPlugin,
      ...input.plugins,
    ],
    pgServices: [
      (isPipelined(input.graphqlPool) ? makePipelinedPgService : makePgService)({
        pool: input.graphqlPool,
        schemas: ["hub", ...input.extraPgSchemas],
      }),
    ],
    grafserv: {
      graphqlPath: "/graphql",
      graphqlOverGET: true,
      graphiql: input.graphiql,
      graphiqlOnGraphQLGET: input.graphiql,
      graphiqlPath: "/graphiql",
      maxRequestLength: input.maxRequestLength,
      websockets: false,
      // grafast writes the JSON text itself instead of building objects that are then stringified.
      outputDataAsString: true,
      maskError: makeMaskError(input.log),
    },
    grafast: {
      context(requestContext): Partial<PluginContext> {
        const req = requestContext.node?.req as (RequestWithIdentity & object) | undefined;
        const identity = req?.identity;
        return {
          identity,
          superuserPool: superuserPoolFor(identity),
          pgSettings: pgSettingsFor(identity, statementTimeoutMs),
          requestId: requestContext.fastifyv5?.request.id,
        };
      },
    },
  };
}
