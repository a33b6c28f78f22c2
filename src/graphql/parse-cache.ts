import { GraphQLError, Source, parse, validate, visit, type DocumentNode, type GraphQLSchema, type OperationDefinitionNode, type ValidationRule } from "graphql";
import type { ExecutionConfig } from "grafserv";
import { isPromiseLike } from "grafast";
import { LRUCache } from "lru-cache";
import { ErrorCode } from "../errors.js";
import { clientError } from "./client-error.js";
import { isTokenLimit, isValidationAborted, withCode } from "./request-errors.js";

/**
 * The hub's own parse-and-validate step for /graphql, in place of grafserv's.
 *
 * grafserv keeps the last 500 results per query text, invalid ones included,
 * and an invalid result's errors hold the whole parsed document (through
 * their `nodes` and `source`): a 1 MiB document parses to tens of MiB, so a
 * client sending distinct invalid documents could pin gigabytes. Here:
 *
 * - only valid documents are cached, and the cache is bounded by an
 *   estimate of the memory its documents take (the query text, plus a fixed
 *   cost per AST node, measured at about 150–210 bytes once the lexer's token
 *   chain is dropped), not by a number of entries; a document whose estimate
 *   exceeds `maxEntryBytes` is never cached;
 * - invalid results are never cached: their errors go to the client and are
 *   garbage once it is answered;
 * - grafast's operation-plan cache (one entry per operation AST node, 500 of
 *   them) is replaced by a WeakMap keyed by the same node, so a plan lives
 *   exactly as long as its document: while the document is in this cache,
 *   or until the request that parsed it is answered;
 * - the hub's own rules (size, depth, aliases, operation types) run before
 *   graphql's standard rules, so an oversized document gets its own error and
 *   never reaches the standard rules' quadratic field-merging check.
 */
export interface ParseCacheOptions {
  /** Total estimated bytes of cached documents (default 16 MiB). */
  maxBytes: number;
  /** A document estimated above this is parsed and validated every time (default 1 MiB). */
  maxEntryBytes: number;
  /**
   * Most lexical tokens in a document (comments do not count): parsing stops
   * there, so a request's transient parse memory and validation time are
   * bounded too (default 20,000; a 1000-field query with arguments needs a
   * few thousand).
   */
  maxTokens: number;
  /** Rules run first; the document meets the standard (and other plugins') rules only if these pass. */
  firstRules: readonly ValidationRule[];
  /**
   * Other first rules for requests this says are an operator's (an API key the
   * auth hook verified): they get their own validator and their own cache, so a
   * document valid for an operator is never served from cache to anyone else.
   */
  operator?: { firstRules: readonly ValidationRule[]; is: (requestContext: Partial<Grafast.RequestContext>) => boolean };
}

export const DEFAULT_PARSE_CACHE = { maxBytes: 16 * 1024 * 1024, maxEntryBytes: 1024 * 1024, maxTokens: 20_000 };

/** Estimated heap bytes per AST node of a cached document (measured 143–212; rounded up). */
const BYTES_PER_NODE = 256;

type ParseResult = ReturnType<ExecutionConfig["parseAndValidate"]>;

/** Valid documents by query text, least recently used dropped first, bounded by estimated bytes. */
class DocumentCache {
  private readonly entries: LRUCache<string, ParseResult>;
  // The same query as the last one (the common case under load) is answered without hashing it.
  private newest: ParseResult | undefined;
  private newestQuery: string | undefined;
  constructor(maxBytes: number, maxEntryBytes: number) {
    this.entries = new LRUCache<string, ParseResult>({ maxSize: maxBytes, maxEntrySize: Math.min(maxBytes, maxEntryBytes) });
  }

  get(query: string): ParseResult | undefined {
    if (query === this.newestQuery) return this.newest;
    const result = this.entries.get(query);
    if (result !== undefined) {
      this.newest = result;
      this.newestQuery = query;
    }
    return result;
  }

  /** Not cached when `bytes` is above the entry limit. */
  set(query: string, result: ParseResult, bytes: number): void {
    if (this.entries.has(query)) return;
    this.entries.set(query, result, { size: bytes });
    if (!this.entries.has(query)) return;
    this.newest = result;
    this.newestQuery = query;
  }

  get size(): number {
    return this.entries.size;
  }
  get totalBytes(): number {
    return this.entries.calculatedSize;
  }
}

/**
 * Drops each node's links into the lexer's token chain (every token of the
 * document, comments included: a third to most of a parsed document's memory).
 * Nothing after parsing reads tokens; error locations need only `loc.start`
 * and `loc.source`, which stay. Returns the number of nodes.
 */
function dropTokens(document: DocumentNode): number {
  let nodes = 0;
  visit(document, {
    enter(node) {
      nodes++;
      const loc = node.loc as { startToken: unknown; endToken: unknown } | undefined;
      if (loc) {
        loc.startToken = null;
        loc.endToken = null;
      }
    },
  });
  return nodes;
}

function validationErrors(errors: readonly GraphQLError[]): GraphQLError[] {
  return errors.map((error) =>
    isValidationAborted(error)
      ? clientError(
          ErrorCode.QUERY_TOO_COMPLEX,
          "The document is too complex to validate (graphql's work budget for comparing fields ran out); send fewer repeated or overlapping fields.",
        )
      : withCode(error, ErrorCode.GRAPHQL_VALIDATION_FAILED),
  );
}

function parseError(error: unknown, source: Source, maxTokens: number): GraphQLError {
  if (error instanceof GraphQLError) {
    if (isTokenLimit(error, source, maxTokens)) {
      return clientError(
        ErrorCode.QUERY_TOO_LARGE,
        `The document has more than ${maxTokens} tokens (names, punctuation, values; comments do not count); the limit is ${maxTokens}.`,
        { limit: maxTokens },
      );
    }
    return withCode(error, ErrorCode.GRAPHQL_PARSE_FAILED);
  }
  if (error instanceof RangeError) {
    // The recursive-descent parser ran out of stack: brackets nested thousands deep.
    return clientError(ErrorCode.QUERY_TOO_DEEP, "The document is nested too deeply to parse; the depth limit is far lower.");
  }
  throw error;
}

type OperationPlanCache = { get(operation: OperationDefinitionNode): unknown; set(operation: OperationDefinitionNode, entry: unknown): void };

/**
 * grafast keeps its operation-plan cache on the schema under a symbol it does
 * not export; it creates it at the first request. Once it exists, put a
 * WeakMap in its place (same get/set): see the module comment.
 */
function replaceOperationPlanCache(schema: GraphQLSchema): boolean {
  const grafast = (schema.extensions as { grafast?: Record<symbol, unknown> }).grafast;
  if (!grafast) return false;
  const key = Object.getOwnPropertySymbols(grafast).find((s) => s.description === "cacheByOperation");
  if (!key) return false;
  const plans = new WeakMap<OperationDefinitionNode, unknown>();
  const cache: OperationPlanCache = {
    get: (operation) => plans.get(operation),
    set: (operation, entry) => void plans.set(operation, entry),
  };
  grafast[key] = cache;
  return true;
}

export function makeParseAndValidate(
  schema: GraphQLSchema,
  standardRules: () => readonly ValidationRule[],
  options: ParseCacheOptions,
): ExecutionConfig["parseAndValidate"] & { cache: DocumentCache } {
  const cache = new DocumentCache(options.maxBytes, options.maxEntryBytes);
  const { firstRules, maxTokens } = options;
  const parseOptions = { maxLexicalTokens: maxTokens };
  let planCacheReplaced = false;
  function parseAndValidate(query: string): ParseResult {
    if (!planCacheReplaced) planCacheReplaced = replaceOperationPlanCache(schema);
    const cached = cache.get(query);
    if (cached !== undefined) return cached;
    let document: DocumentNode;
    const source = new Source(query, "GraphQL HTTP Request");
    try {
      document = parse(source, parseOptions);
    } catch (error) {
      return { errors: [parseError(error, source, maxTokens)] };
    }
    let errors = validate(schema, document, firstRules);
    if (errors.length === 0) errors = validate(schema, document, standardRules());
    if (errors.length > 0) return { errors: validationErrors(errors) };
    const result: ParseResult = { document };
    // Text is UTF-16 in the worst case: 2 bytes a character.
    const bytes = 2 * query.length + BYTES_PER_NODE * dropTokens(document);
    cache.set(query, result, bytes);
    return result;
  }
  return Object.assign(parseAndValidate, { cache });
}

/**
 * Wraps grafserv's getExecutionConfig (as its Envelop preset does) to hand out
 * the hub's parseAndValidate, one per schema. Stays synchronous when the
 * original is.
 */
export function makeParseAndValidatePlugin(options: Partial<ParseCacheOptions>): GraphileConfig.Plugin {
  const resolved: ParseCacheOptions = { ...DEFAULT_PARSE_CACHE, firstRules: [], ...options };
  return {
    name: "HubParseAndValidatePlugin",
    version: "0.1.0",
    grafserv: {
      middleware: {
        setPreset(next, event) {
          const original = event.getExecutionConfig;
          const standardRules = () => event.validationRules;
          const { operator } = resolved;
          let lastSchema: GraphQLSchema | undefined;
          let lastParseAndValidate: ExecutionConfig["parseAndValidate"] | undefined;
          let lastOperatorParseAndValidate: ExecutionConfig["parseAndValidate"] | undefined;
          const substitute = (config: ExecutionConfig, ctx: Partial<Grafast.RequestContext>): ExecutionConfig => {
            if (config.schema !== lastSchema) {
              lastSchema = config.schema;
              lastParseAndValidate = makeParseAndValidate(config.schema, standardRules, resolved);
              lastOperatorParseAndValidate = operator ? makeParseAndValidate(config.schema, standardRules, { ...resolved, firstRules: operator.firstRules }) : undefined;
            }
            // A fresh object per call (grafserv builds one per request): safe to change.
            config.parseAndValidate = lastOperatorParseAndValidate && operator!.is(ctx) ? lastOperatorParseAndValidate : lastParseAndValidate!;
            return config;
          };
          event.getExecutionConfig = function getExecutionConfig(ctx) {
            const config = original.call(this, ctx);
            return isPromiseLike(config) ? Promise.resolve(config).then((c) => substitute(c, ctx)) : substitute(config, ctx);
          };
          return next();
        },
      },
    },
  };
}
