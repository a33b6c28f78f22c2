/**
 * Mistakes in a schema extension that graphile-utils lets through, found when
 * the schema is built so they stop the start (HUB_PLUGIN_FAILED) instead of
 * leaving a server without the field: a resolver or plan for a field the
 * plugin's typeDefs do not declare (a renamed field), a mutation declared with
 * nothing to run it, and (explainSchemaError) an unknown type in typeDefs.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parse, type DefinitionNode, type DocumentNode, type TypeNode } from "graphql";
import { HubError } from "../errors.js";
import { userFrame } from "../startup-errors.js";

/** Where a plugin made with @hubpkg/hub/graphile's extendSchema came from, kept on the plugin object. */
export const PLUGIN_SOURCE: unique symbol = Symbol.for("hub.pluginSource");

export interface PluginSource {
  /** file:line:column of the extendSchema / makeExtendSchemaPlugin call. */
  site: string | undefined;
  /** The plugin's typeDefs, once the schema build has read them. */
  document?: DocumentNode;
}

// Frames in the hub's own code (dist/, or src/ where a source map points there) are not the plugin author's.
const HUB_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const HUB_CODE = [path.join(HUB_ROOT, "dist") + path.sep, path.join(HUB_ROOT, "src") + path.sep];

/** The file and line of the user's code that is calling the hub now. */
export function callerSite(): string | undefined {
  const here = new Error("call site");
  here.stack = (here.stack ?? "").split("\n").filter((line) => !HUB_CODE.some((dir) => line.includes(dir))).join("\n");
  return userFrame(here);
}

type Spec = Record<string, unknown>;
const OBJECT_KINDS = new Set(["ObjectTypeDefinition", "ObjectTypeExtension", "InterfaceTypeDefinition", "InterfaceTypeExtension"]);

/** typeDefs as graphile-utils accepts them: a document, an array of documents, or SDL text. */
export function documentOf(typeDefs: unknown): DocumentNode | undefined {
  if (typeof typeDefs === "string") return parse(typeDefs);
  if (Array.isArray(typeDefs)) return { kind: "Document", definitions: typeDefs.flatMap((d: DocumentNode) => d?.definitions ?? []) } as DocumentNode;
  return (typeDefs as DocumentNode | undefined)?.kind === "Document" ? (typeDefs as DocumentNode) : undefined;
}

/** Field names per object or interface type the document defines or extends. */
function declaredFields(document: DocumentNode): Map<string, string[]> {
  const fields = new Map<string, string[]>();
  for (const definition of document.definitions as readonly (DefinitionNode & { name?: { value: string }; fields?: readonly { name: { value: string } }[] })[]) {
    if (!OBJECT_KINDS.has(definition.kind) || !definition.name) continue;
    const list = fields.get(definition.name.value) ?? [];
    list.push(...(definition.fields ?? []).map((f) => f.name.value));
    fields.set(definition.name.value, list);
  }
  return fields;
}

/** Every type name the document's definitions mention (object, interface, enum, union, scalar, input). */
function namedTypes(document: DocumentNode): Set<string> {
  return new Set((document.definitions as readonly { name?: { value: string } }[]).flatMap((d) => (d.name ? [d.name.value] : [])));
}

const fieldKeys = (spec: unknown): string[] =>
  spec && typeof spec === "object" && Object.getPrototypeOf(spec) === Object.prototype ? Object.keys(spec).filter((key) => !key.startsWith("__")) : [];

/** Resolvers and plans keyed to a field the typeDefs lack, and mutations with neither. */
function problemsOf(definition: Spec, document: DocumentNode): string[] {
  const fields = declaredFields(document);
  const types = namedTypes(document);
  const problems: string[] = [];
  for (const where of ["resolvers", "plans"] as const) {
    for (const [typeName, spec] of Object.entries((definition[where] as Spec | undefined) ?? {})) {
      const declared = fields.get(typeName);
      if (!declared) {
        // Enums, scalars and unions take values or functions, not fields.
        if (!types.has(typeName)) problems.push(`${where}.${typeName} is given, but its typeDefs neither define nor extend a type ${typeName}`);
        continue;
      }
      for (const key of fieldKeys(spec)) {
        if (declared.includes(key)) continue;
        problems.push(`${where}.${typeName}.${key} is given, but its typeDefs declare no field ${typeName}.${key} (${typeName} fields there: ${declared.join(", ")})`);
      }
    }
  }
  const implemented = (field: string) =>
    [definition.resolvers, definition.plans].some((spec) => ((spec as Spec | undefined)?.Mutation as Spec | undefined)?.[field] != null) ||
    (((definition.objects as Spec | undefined)?.Mutation as Spec | undefined)?.plans as Spec | undefined)?.[field] != null;
  for (const field of fields.get("Mutation") ?? []) {
    if (!implemented(field)) problems.push(`its typeDefs declare the mutation Mutation.${field} with no resolver or plan for it (resolvers.Mutation.${field}, or objects.Mutation.plans.${field}): every call would answer null`);
  }
  return problems;
}

const pluginLabel = (name: string, source: PluginSource | undefined) => `Plugin ${name}${source?.site ? ` (made at ${source.site})` : ""}`;

/** Throws HUB_PLUGIN_FAILED naming the plugin and each field at fault. */
export function checkExtension(definition: Spec, name: string, source: PluginSource): void {
  const document = documentOf(definition.typeDefs);
  if (!document) return; // graphile-utils reports a missing or malformed typeDefs itself
  source.document = document;
  const problems = problemsOf(definition, document);
  if (problems.length === 0) return;
  throw new HubError("HUB_PLUGIN_FAILED", `${pluginLabel(name, source)}: ${problems.join("; ")}.`);
}

const innerName = (type: TypeNode): string => (type.kind === "NamedType" ? type.name.value : innerName(type.type));

/** The fields and arguments of a document that use the type `typeName`, as "Type.field" or "Type.field(arg:)". */
function usesOf(document: DocumentNode, typeName: string): string[] {
  const uses: string[] = [];
  type FieldNode = { name: { value: string }; type: TypeNode; arguments?: readonly { name: { value: string }; type: TypeNode }[] };
  for (const definition of document.definitions as readonly { name?: { value: string }; fields?: readonly FieldNode[] }[]) {
    for (const field of definition.fields ?? []) {
      const at = `${definition.name?.value}.${field.name.value}`;
      if (innerName(field.type) === typeName) uses.push(at);
      for (const arg of field.arguments ?? []) if (innerName(arg.type) === typeName) uses.push(`${at}(${arg.name.value}:)`);
    }
  }
  return uses;
}

/**
 * graphile-utils names an unknown type in typeDefs by the plugin's name only
 * (often a random ExtendSchemaPlugin_…): say where the plugin was made and
 * which fields use the type.
 */
export function explainSchemaError(error: unknown, plugins: readonly GraphileConfig.Plugin[]): HubError | undefined {
  const message = (error as Error | undefined)?.message ?? "";
  const unknownType = /^(\S+) could not find type named '([^']+)'/.exec(message);
  if (!unknownType) return undefined;
  const [, name, typeName] = unknownType as unknown as [string, string, string];
  const source = (plugins.find((plugin) => plugin.name === name) as { [PLUGIN_SOURCE]?: PluginSource } | undefined)?.[PLUGIN_SOURCE];
  const uses = source?.document ? usesOf(source.document, typeName) : [];
  return new HubError(
    "HUB_PLUGIN_FAILED",
    `${pluginLabel(name, source)}: its typeDefs use the type ${typeName}${uses.length ? ` (in ${uses.join(", ")})` : ""}, which no plugin defines: a typo (Int, Float, String, Boolean, ID, UUID…) or a type of a plugin missing from the plugins option.`,
    { cause: error },
  );
}
