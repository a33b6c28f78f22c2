/**
 * The generated GraphQL schema as data, read by introspection, so tests can
 * walk every table the API exposes without naming them: the `allX` root
 * connections, the unique lookups (`xById`, `xByKeyAndCasinoId`…), the
 * `hubCurrentX` roots and every relation field of every table type.
 */
import { gql } from "./http.js";

export interface TypeRef {
  kind: string;
  name: string | null;
  ofType: TypeRef | null;
}
export interface IntrospectedField {
  name: string;
  args: { name: string; type: TypeRef }[];
  type: TypeRef;
}
export interface IntrospectedType {
  kind: string;
  name: string;
  fields: IntrospectedField[] | null;
  inputFields: { name: string; type: TypeRef }[] | null;
  enumValues: { name: string }[] | null;
}

export const INTROSPECTION = /* GraphQL */ `
  query SchemaModel {
    __schema {
      queryType { name }
      mutationType { name }
      types {
        kind name
        fields(includeDeprecated: true) { name args { name type { ...Ref } } type { ...Ref } }
        inputFields { name type { ...Ref } }
        enumValues(includeDeprecated: true) { name }
      }
    }
  }
  fragment Ref on __Type { kind name ofType { kind name ofType { kind name ofType { kind name } } } }
`;

/** The named type under NON_NULL/LIST wrappers, and whether a list was on the way. */
export function unwrap(ref: TypeRef): { name: string; kind: string; list: boolean } {
  let list = false;
  let cur: TypeRef | null = ref;
  while (cur && (cur.kind === "NON_NULL" || cur.kind === "LIST")) {
    if (cur.kind === "LIST") list = true;
    cur = cur.ofType;
  }
  if (!cur?.name) throw new Error(`unnamed type reference ${JSON.stringify(ref)}`);
  return { name: cur.name, kind: cur.kind, list };
}

/** GraphQL type syntax for a variable of this type ("UUID!", "[String!]"). */
export function printType(ref: TypeRef): string {
  if (ref.kind === "NON_NULL") return `${printType(ref.ofType!)}!`;
  if (ref.kind === "LIST") return `[${printType(ref.ofType!)}]`;
  return ref.name!;
}

/**
 * Relations whose row depends on the session making the request, not only on
 * the parent row (an operator reading the same user gets null): tested by
 * their own files (HubUser.activeHashChain: test/hash-chain.test.ts).
 */
const SESSION_DEPENDENT = new Set(["HubUser.activeHashChain"]);

export interface Relation {
  field: string;
  /** The table type it leads to. */
  target: string;
  /** A connection (`{ totalCount nodes { … } }`) rather than one row. */
  many: boolean;
}
export interface TableType {
  name: string;
  /** Scalar and enum fields without required arguments. */
  leaves: string[];
  relations: Relation[];
}
export interface Lookup {
  field: string;
  type: string;
  args: { name: string; type: TypeRef }[];
}
export interface SchemaModel {
  types: Map<string, IntrospectedType>;
  queryType: string;
  mutationType: string | null;
  /** Connection type name → its node (table) type. */
  connections: Map<string, string>;
  tables: Map<string, TableType>;
  /** Query fields returning a connection of a table type (allX). */
  rootConnections: { field: string; type: string }[];
  /** Query fields with required arguments returning one row of a table type. */
  lookups: Lookup[];
  /** Query fields without arguments returning one row of a table type (hubCurrentX). */
  currents: { field: string; type: string }[];
  /** Query fields returning an object that is none of the above (listed for the record). */
  otherQueryFields: string[];
}

const requiredArgs = (field: IntrospectedField) => field.args.filter((a) => a.type.kind === "NON_NULL");

export async function loadSchemaModel(url: string, headers: Record<string, string> = {}): Promise<SchemaModel> {
  const res = await gql<{ __schema: { queryType: { name: string }; mutationType: { name: string } | null; types: IntrospectedType[] } }>(
    url,
    INTROSPECTION,
    {},
    headers,
  );
  if (res.body.errors || !res.body.data) throw new Error(`introspection failed: ${JSON.stringify(res.body.errors)}`);
  const schema = res.body.data.__schema;
  const types = new Map(schema.types.map((t) => [t.name, t]));

  // A connection: an object with totalCount and nodes: [T] where T is an object.
  const connections = new Map<string, string>();
  for (const type of schema.types) {
    if (type.kind !== "OBJECT" || !type.fields) continue;
    const nodes = type.fields.find((f) => f.name === "nodes");
    const total = type.fields.find((f) => f.name === "totalCount");
    if (!nodes || !total) continue;
    const node = unwrap(nodes.type);
    if (node.list && node.kind === "OBJECT") connections.set(type.name, node.name);
  }

  const query = types.get(schema.queryType.name)!;
  const tableNames = new Set(connections.values());
  for (const field of query.fields ?? []) {
    const t = unwrap(field.type);
    if (t.kind === "OBJECT" && !t.list && t.name !== schema.queryType.name && requiredArgs(field).length > 0 && requiredArgs(field).length === field.args.length) {
      tableNames.add(t.name);
    }
  }

  const tables = new Map<string, TableType>();
  for (const name of tableNames) {
    const type = types.get(name)!;
    const leaves: string[] = [];
    const relations: Relation[] = [];
    for (const field of type.fields ?? []) {
      if (requiredArgs(field).length > 0) continue;
      if (SESSION_DEPENDENT.has(`${name}.${field.name}`)) continue;
      const t = unwrap(field.type);
      if (t.kind === "SCALAR" || t.kind === "ENUM") leaves.push(field.name);
      else if (connections.has(t.name)) relations.push({ field: field.name, target: connections.get(t.name)!, many: true });
      else if (tableNames.has(t.name) && !t.list) relations.push({ field: field.name, target: t.name, many: false });
    }
    tables.set(name, { name, leaves, relations });
  }

  const rootConnections: SchemaModel["rootConnections"] = [];
  const lookups: Lookup[] = [];
  const currents: SchemaModel["currents"] = [];
  const otherQueryFields: string[] = [];
  for (const field of query.fields ?? []) {
    const t = unwrap(field.type);
    if (t.kind !== "OBJECT" || t.name === schema.queryType.name) continue;
    // allX reads a table; other connection fields (hubUserSearch, hubBankrollHourly) are SQL functions.
    if (connections.has(t.name) && /^all[A-Z]/.test(field.name)) rootConnections.push({ field: field.name, type: connections.get(t.name)! });
    else if (tables.has(t.name) && field.args.length === 0) currents.push({ field: field.name, type: t.name });
    else if (tables.has(t.name) && requiredArgs(field).length === field.args.length) lookups.push({ field: field.name, type: t.name, args: field.args });
    else otherQueryFields.push(field.name);
  }
  return {
    types,
    queryType: schema.queryType.name,
    mutationType: schema.mutationType?.name ?? null,
    connections,
    tables,
    rootConnections,
    lookups,
    currents,
    otherQueryFields,
  };
}

/**
 * A selection of every leaf of a table type, and (while depth > 0) of every
 * relation field with the same selection one level down.
 */
export function selectionOf(model: SchemaModel, typeName: string, depth: number, only?: string): string {
  const table = model.tables.get(typeName)!;
  const parts = [...table.leaves];
  if (depth > 0) {
    for (const rel of table.relations) {
      if (only !== undefined && rel.field !== only) continue;
      const inner = selectionOf(model, rel.target, depth - 1);
      parts.push(rel.many ? `${rel.field} { totalCount nodes { ${inner} } }` : `${rel.field} { ${inner} }`);
    }
  }
  return parts.join(" ");
}
