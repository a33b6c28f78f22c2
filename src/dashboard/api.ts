import { createClient, type Client } from "graphql-ws";

/**
 * Everything the page reads or changes goes through /graphql, as any client
 * would, with the operator's key in the Authorization header. The key lives
 * in this tab's sessionStorage only: never in a URL, gone with the tab.
 */
const KEY_ITEM = "hub.dashboard.apiKey";

export const storedKey = (): string | null => sessionStorage.getItem(KEY_ITEM);
export const storeKey = (key: string) => sessionStorage.setItem(KEY_ITEM, key);
export const forgetKey = () => sessionStorage.removeItem(KEY_ITEM);

const graphqlUrl = () => new URL("/graphql", window.location.origin).toString();

export class GraphQLRequestError extends Error {
  constructor(
    message: string,
    readonly codes: string[],
  ) {
    super(message);
  }
}

/** Called when the hub stops accepting the key (revoked meanwhile): back to the login form. */
let onKeyRefused: (message: string) => void = () => undefined;
export const whenKeyRefused = (fn: (message: string) => void) => {
  onKeyRefused = fn;
};

export async function gql<T = any>(query: string, variables?: Record<string, unknown>, key = storedKey()): Promise<T> {
  const response = await fetch(graphqlUrl(), {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json", ...(key ? { authorization: `apikey:${key}` } : {}) },
    body: JSON.stringify({ query, variables }),
    credentials: "omit",
    cache: "no-store",
  });
  let body: { data?: T; errors?: { message: string; extensions?: { code?: string } }[]; message?: string };
  try {
    body = await response.json();
  } catch {
    throw new GraphQLRequestError(`The hub answered ${response.status} ${response.statusText} without JSON.`, []);
  }
  if (body.errors?.length) {
    const codes = body.errors.map((e) => e.extensions?.code ?? "");
    const message = body.errors.map((e) => e.message).join("\n");
    if (codes.includes("UNAUTHENTICATED")) onKeyRefused(message);
    throw new GraphQLRequestError(message, codes);
  }
  if (!response.ok || body.data === undefined) {
    throw new GraphQLRequestError(body.message ?? `The hub answered ${response.status} ${response.statusText}.`, []);
  }
  return body.data;
}

// What this hub's schema has, read once at login with one __schema query:
// pages whose fields are missing say so instead of failing.

export interface FieldInfo {
  name: string;
  args: string[];
  /** The named type under any list / non-null wrappers. */
  type: string;
  kind: string;
  list: boolean;
}
export interface TypeInfo {
  name: string;
  kind: string;
  fields: Map<string, FieldInfo>;
  possibleTypes: string[];
}
export interface Capabilities {
  query: Map<string, FieldInfo>;
  mutation: Map<string, FieldInfo>;
  subscription: Map<string, FieldInfo>;
  types: Map<string, TypeInfo>;
}

const TYPE_REF = "kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } }";
const SCHEMA_QUERY = `query HubDashboardSchema { __schema {
  queryType { name } mutationType { name } subscriptionType { name }
  types { name kind possibleTypes { name } fields { name args { name } type { ${TYPE_REF} } } }
} }`;

interface TypeRef {
  kind: string;
  name: string | null;
  ofType: TypeRef | null;
}
function unwrap(ref: TypeRef): { type: string; kind: string; list: boolean } {
  let list = false;
  let t: TypeRef = ref;
  while (t.ofType) {
    if (t.kind === "LIST") list = true;
    t = t.ofType;
  }
  return { type: t.name ?? "", kind: t.kind, list };
}

export async function loadCapabilities(key: string): Promise<Capabilities> {
  let data: { __schema: any };
  try {
    data = await gql<{ __schema: any }>(SCHEMA_QUERY, undefined, key);
  } catch (error) {
    if (/introspection/i.test((error as Error).message)) {
      throw new GraphQLRequestError(
        "This hub refuses GraphQL introspection to this key, which the dashboard needs to see what the hub offers. This hub allows it to operators' API keys even with HUB_INTROSPECTION=off; an older hub needs HUB_INTROSPECTION=on (or introspection: true).",
        (error as GraphQLRequestError).codes ?? [],
      );
    }
    throw error;
  }
  const types = new Map<string, TypeInfo>();
  for (const t of data.__schema.types as any[]) {
    const fields = new Map<string, FieldInfo>();
    for (const f of (t.fields ?? []) as any[]) fields.set(f.name, { name: f.name, args: f.args.map((a: any) => a.name), ...unwrap(f.type) });
    types.set(t.name, { name: t.name, kind: t.kind, fields, possibleTypes: (t.possibleTypes ?? []).map((p: any) => p.name) });
  }
  const root = (name: string | undefined) => (name ? types.get(name)?.fields : undefined) ?? new Map<string, FieldInfo>();
  return {
    query: root(data.__schema.queryType?.name),
    mutation: root(data.__schema.mutationType?.name),
    subscription: root(data.__schema.subscriptionType?.name),
    types,
  };
}

/**
 * An operator key sees every API key (its own at least); without a valid
 * operator key the hub answers as to anyone: no rows. So none means refused.
 */
export async function checkKey(key: string): Promise<void> {
  const data = await gql<{ allHubApiKeys: { totalCount: number } }>("query HubDashboardLogin { allHubApiKeys { totalCount } }", undefined, key);
  if (data.allHubApiKeys.totalCount < 1) {
    throw new GraphQLRequestError("The hub refused this API key: it is unknown or revoked (a player's session token is not an operator key).", ["UNAUTHENTICATED"]);
  }
}

/** The scalar and enum fields of a type: what a generic table can show. */
export function scalarFields(caps: Capabilities, typeName: string): FieldInfo[] {
  const t = caps.types.get(typeName);
  if (!t) return [];
  return [...t.fields.values()].filter((f) => (f.kind === "SCALAR" || f.kind === "ENUM") && f.args.length === 0);
}

/** Every bet type (implementors of the Bet interface) and the all… query that lists it. */
export interface BetSource {
  type: string;
  listField: string;
  byIdField: string | undefined;
  fields: TypeInfo["fields"];
}
export function betSources(caps: Capabilities): BetSource[] {
  const bet = caps.types.get("Bet");
  if (!bet) return [];
  const sources: BetSource[] = [];
  for (const type of bet.possibleTypes) {
    const list = [...caps.query.values()].find((f) => f.name.startsWith("all") && f.type === `${type}Connection`);
    const info = caps.types.get(type);
    if (!list || !info) continue;
    const byId = `${type[0]!.toLowerCase()}${type.slice(1)}ById`;
    sources.push({ type, listField: list.name, byIdField: caps.query.has(byId) ? byId : undefined, fields: info.fields });
  }
  return sources;
}

/** The creation time a UUIDv7 carries in its first 48 bits. */
export function uuidTime(id: string): number {
  return parseInt(id.replace(/-/g, "").slice(0, 12), 16);
}

let live: Client | undefined;
/** One WebSocket per tab (graphql-transport-ws), opened on first use, with the key in connectionParams. */
export function liveClient(): Client {
  if (!live) {
    const url = new URL("/graphql", window.location.origin);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    live = createClient({
      url: url.toString(),
      connectionParams: () => ({ authorization: `apikey:${storedKey() ?? ""}` }),
      lazy: true,
      retryAttempts: 5,
    });
  }
  return live;
}
export function closeLiveClient(): void {
  void live?.dispose();
  live = undefined;
}
