/**
 * Where GraphQL is served (grafserv's default path), over HTTP and WebSocket.
 * Fastify ignores a trailing slash when routing (`ignoreTrailingSlash`), so
 * `/graphql/` reaches grafserv exactly as `/graphql` does; every other place
 * that asks "is this a GraphQL request" (the response counters, the
 * per-identity refusal's error shape, the WebSocket upgrade) must answer the
 * same way, so they all ask here.
 */
export const GRAPHQL_PATH = "/graphql";

/** The path of a request URL, without its query string. */
export function pathOf(url: string): string {
  const end = url.indexOf("?");
  return end === -1 ? url : url.slice(0, end);
}

/** Whether a path (no query string) is the GraphQL endpoint, with or without a trailing slash. */
export function isGraphQLPath(path: string, graphqlPath: string = GRAPHQL_PATH): boolean {
  return path === graphqlPath || path === `${graphqlPath}/`;
}
