/** Real HTTP against a listening server (fastify.inject cannot see Express responses). */
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
