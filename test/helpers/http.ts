/** Real HTTP against a listening server (fastify.inject cannot see Express responses). */
import http from "node:http";

export interface GraphQLResponse<T = Record<string, unknown>> {
  status: number;
  body: { data?: T | null; errors?: { message: string; extensions?: Record<string, unknown> }[] };
  headers: Headers;
}

export async function gql<T = Record<string, any>>(
  url: string,
  query: string,
  variables?: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<GraphQLResponse<T>> {
  const res = await fetch(`${url}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ query, variables }),
  });
  const text = await res.text();
  let body: GraphQLResponse<T>["body"];
  try {
    body = JSON.parse(text) as GraphQLResponse<T>["body"];
  } catch {
    throw new Error(`POST /graphql answered ${res.status} with a non-JSON body: ${text.slice(0, 300)}`);
  }
  return { status: res.status, body, headers: res.headers };
}

const keepAliveAgent = new http.Agent({ keepAlive: true });

/**
 * gql() over node:http on a keep-alive agent, for a test that sends thousands of requests: the same
 * request and answer, for about a third of fetch's CPU in the test process.
 */
export function gqlOverHttp<T = Record<string, any>>(
  url: string,
  query: string,
  variables?: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<Omit<GraphQLResponse<T>, "headers">> {
  const payload = JSON.stringify({ query, variables });
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/graphql`, {
      method: "POST",
      agent: keepAliveAgent,
      headers: { "content-type": "application/json", ...headers, "content-length": Buffer.byteLength(payload) },
    });
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (text += c));
      res.on("error", reject);
      res.on("end", () => {
        try {
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as GraphQLResponse<T>["body"] });
        } catch {
          reject(new Error(`POST /graphql answered ${res.statusCode} with a non-JSON body: ${text.slice(0, 300)}`));
        }
      });
    });
    req.on("error", reject);
    req.end(payload);
  });
}

export interface TimedAnswer {
  ms: number;
  status: number;
  body: any;
}

/** One request on the given agent, timed from write to the last byte of the answer. */
export function timedRequest(agent: http.Agent, url: string, method: string, urlPath: string, headers: Record<string, string> = {}, body?: unknown): Promise<TimedAnswer> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      new URL(urlPath, url),
      {
        method,
        agent,
        headers: { ...headers, ...(payload ? { "content-type": "application/json", "content-length": Buffer.byteLength(payload) } : {}) },
        timeout: 60_000,
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c) => (text += c));
        res.on("end", () => {
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // keep the text
          }
          resolve({ ms: performance.now() - started, status: res.statusCode ?? 0, body: parsed });
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error("no answer within 60 s")));
    req.on("error", reject);
    req.end(payload);
  });
}
