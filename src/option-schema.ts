/**
 * Options given as JavaScript values (startAndListen's, the plugins') are
 * checked against JSON schemas with ajv, the validator Fastify uses. Each
 * schema that can fail says in its `expected` keyword, in words, what it
 * accepts; optionProblem() turns ajv's first error into the place (an option
 * path such as websocket.maxOperations), the value received there and that
 * text, and each caller words it its own way (HubError, TypeError).
 *
 * Environment variables and the command line are text, read by the parsers
 * of parse.ts; the options that override a variable go through the same
 * parser, so both sources give one message.
 */
import { createRequire } from "node:module";
import type { Ajv as AjvInstance, ErrorObject, SchemaObject, ValidateFunction } from "ajv";

let ajv: AjvInstance | undefined;

/** One ajv for every option schema, loaded at the first check (Fastify loads the same module when a server starts). */
function validator(): AjvInstance {
  if (ajv) return ajv;
  const { Ajv } = createRequire(import.meta.url)("ajv") as typeof import("ajv");
  ajv = new Ajv({ verbose: true, allErrors: false, strict: true });
  /** What the schema accepts, in words: the end of the hub's message. */
  ajv.addKeyword({ keyword: "expected", schemaType: "string" });
  /** A function (JSON schema has no type for one). */
  ajv.addKeyword({ keyword: "isFunction", schemaType: "boolean", errors: false, validate: (_: boolean, data: unknown) => typeof data === "function" });
  return ajv;
}

export interface OptionProblem {
  /** Keys and indexes from the checked object down to the value refused. */
  path: (string | number)[];
  received: unknown;
  expected: string;
  /** Set when the key itself is unknown: `path` ends with it. */
  unknownKey?: boolean;
}

/** `["websocket", "maxOperations"]` → `websocket.maxOperations`; indexes as `plugins[0]`. */
export const pathText = (path: readonly (string | number)[]): string =>
  path.map((key, i) => (typeof key === "number" ? `[${key}]` : i === 0 ? key : `.${key}`)).join("");

function toProblem(error: ErrorObject, schemaAt: (path: (string | number)[]) => SchemaObject | undefined): OptionProblem {
  const path = error.instancePath
    .split("/")
    .slice(1)
    .map((segment) => segment.replace(/~1/g, "/").replace(/~0/g, "~"))
    .map((segment) => (/^\d+$/.test(segment) ? Number(segment) : segment));
  const parent = error.parentSchema as SchemaObject | undefined;
  if (error.keyword === "additionalProperties") {
    const key = String((error.params as { additionalProperty: string }).additionalProperty);
    const known = Object.keys((parent?.properties as object | undefined) ?? {});
    return { path: [...path, key], received: (error.data as Record<string, unknown>)[key], expected: `one of the keys ${known.join(", ")}`, unknownKey: true };
  }
  if (error.keyword === "required") {
    // A required key is described by its own schema, else the object missing it by the object's.
    const key = String((error.params as { missingProperty: string }).missingProperty);
    const expected = (parent?.properties as Record<string, SchemaObject> | undefined)?.[key]?.expected;
    if (typeof expected === "string") return { path: [...path, key], received: undefined, expected };
    if (typeof parent?.expected === "string") return { path, received: error.data, expected: parent.expected };
  }
  // The failing schema's own words, else those of the nearest schema above it (an array of which this is an item).
  for (let up = path.length; up >= 0; up--) {
    const schema = up === path.length ? parent : schemaAt(path.slice(0, up));
    if (typeof schema?.expected === "string") return { path, received: error.data, expected: schema.expected };
  }
  return { path, received: error.data, expected: error.message ?? "another value" };
}

/** The schema under a path of the instance (properties, additionalProperties, items). */
function schemaUnder(root: SchemaObject, path: (string | number)[]): SchemaObject | undefined {
  let schema: SchemaObject | undefined = root;
  for (const key of path) {
    if (!schema) return undefined;
    if (typeof key === "number") schema = schema.items as SchemaObject | undefined;
    else schema = ((schema.properties as Record<string, SchemaObject> | undefined)?.[key] ?? schema.additionalProperties) as SchemaObject | undefined;
    if (typeof schema !== "object") return undefined;
  }
  return schema;
}

/**
 * A checker for one schema, compiled at its first use (compiling costs
 * milliseconds that importing the library should not): the first problem of
 * a value, or undefined when the value fits.
 */
export function optionChecker(schema: SchemaObject): (value: unknown) => OptionProblem | undefined {
  let validate: ValidateFunction | undefined;
  return (value) => {
    validate ??= validator().compile(schema);
    return validate(value) ? undefined : toProblem(validate.errors![0]!, (path) => schemaUnder(schema, path));
  };
}
