import { SafeError } from "grafast";
import { getOperationAST, parse } from "graphql";
import { ErrorCode } from "../errors.js";

/** Whether the operation to run is a subscription; a document that does not parse is not (grafserv reports its syntax error). */
function isSubscription(query: string, operationName: unknown): boolean {
  try {
    return getOperationAST(parse(query), typeof operationName === "string" ? operationName : undefined)?.operation === "subscription";
  } catch {
    return false;
  }
}

/**
 * A subscription sent over POST or GET: a GraphQL error naming the WebSocket
 * endpoint (adapters/websocket.ts serves it), instead of grafserv's generic
 * answer. In grafserv's body middleware, after it has read the body or the
 * query string; costs a substring test per request, and only documents
 * containing "subscription" are parsed here.
 */
export const SubscriptionOverHttpPlugin: GraphileConfig.Plugin = {
  name: "HubSubscriptionOverHttpPlugin",
  version: "0.1.0",
  grafserv: {
    middleware: {
      processGraphQLRequestBody(next, event) {
        // Over WebSocket (grafserv's graphql-ws configuration runs this middleware too) there is no HTTP request.
        const request = event.request;
        if (!request) return next();
        const { query, operationName } = event.body as { query?: unknown; operationName?: unknown };
        if (typeof query === "string" && query.includes("subscription") && isSubscription(query, operationName)) {
          const host = request.headers.host ?? "host";
          const path = event.resolvedPreset.grafserv?.graphqlPath ?? "/graphql";
          throw new SafeError(
            `Subscriptions are served over WebSocket only: connect to ws://${host}${path} with the graphql-transport-ws protocol (the graphql-ws client); received a subscription over HTTP ${request.method}.`,
            { statusCode: 400, code: ErrorCode.SUBSCRIPTION_NEEDS_WEBSOCKET },
          );
        }
        return next();
      },
    },
  },
};
