/**
 * GraphQL through the test server's Fastify `inject()`: the request runs the hub's hooks, identity and
 * GraphQL as one over HTTP does, without a socket or an HTTP parser on either side. For the tests where
 * the socket is not what is tested; real HTTP stays where it is (headers on the wire, keep-alive,
 * shutdown, proxies, Express routes, which inject cannot see).
 */
import { ClientError, type GraphQLClient, type TestServer } from "@hubpkg/hub/test";
import { print, type DocumentNode } from "graphql";
import type { GraphQLResponse } from "./http.js";

type Injecting = Pick<TestServer, "inject">;

function headersOf(raw: Record<string, string | string[] | number | undefined>): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else if (value !== undefined) headers.set(name, String(value));
  }
  return headers;
}

/** POST /graphql through inject(), answered like helpers/http.ts's gql() (status, parsed body, headers). */
export async function injectGql<T = Record<string, any>>(
  server: Injecting,
  query: string,
  variables?: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<GraphQLResponse<T>> {
  const res = await server.inject({
    method: "POST",
    url: "/graphql",
    headers: { "content-type": "application/json", ...headers },
    payload: JSON.stringify({ query, variables }),
  });
  let body: GraphQLResponse<T>["body"];
  try {
    body = JSON.parse(res.body) as GraphQLResponse<T>["body"];
  } catch {
    throw new Error(`POST /graphql (inject) answered ${res.statusCode} with a non-JSON body: ${res.body.slice(0, 300)}`);
  }
  return { status: res.statusCode, body, headers: headersOf(res.headers) };
}

/** The test kit's GraphQLClient (resolves to data, rejects with its ClientError), through inject(). */
export function injectClient(server: Injecting, headers: Record<string, string> = {}): GraphQLClient {
  return {
    async request(document: string | DocumentNode, variables?: Record<string, unknown>) {
      const query = typeof document === "string" ? document : print(document);
      const request = { query, variables };
      const res = await server.inject({
        method: "POST",
        url: "/graphql",
        headers: { "content-type": "application/json", accept: "application/json", ...headers },
        payload: JSON.stringify(request),
      });
      const status = res.statusCode;
      let body: { data?: unknown; errors?: { message: string; extensions?: Record<string, unknown> }[] };
      try {
        body = JSON.parse(res.body) as typeof body;
      } catch {
        throw new ClientError(`POST /graphql (inject) answered HTTP ${status} with a body that is not JSON: ${res.body.slice(0, 300)}`, { status, headers: headersOf(res.headers) }, request);
      }
      const response = { ...body, status, headers: headersOf(res.headers) };
      if (body.errors?.length) throw new ClientError(`GraphQL error: ${body.errors.map((e) => e.message).join("; ")} (HTTP ${status})`, response, request);
      if (status >= 300 || body.data === undefined) throw new ClientError(`POST /graphql (inject) answered HTTP ${status} without data: ${res.body.slice(0, 300)}`, response, request);
      return body.data as any;
    },
  } as GraphQLClient;
}
