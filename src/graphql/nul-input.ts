/**
 * NUL characters (U+0000), which Postgres text cannot hold, refused before
 * the database is reached, with the place they were found: in the variables
 * (before parsing) and in the document's string literals (at validation).
 */
import { GraphQLError, Kind, type ASTNode, type ASTVisitor, type ObjectFieldNode, type ValidationContext, type ValidationRule } from "graphql";
import { SafeError } from "grafast";
import { ErrorCode } from "../errors.js";

/** Whether a JSON value holds a NUL character in any string or key (iterative: nesting can be deep). */
function hasNul(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === "string") {
      if (v.includes("\u0000")) return true;
    } else if (Array.isArray(v)) {
      for (const item of v) stack.push(item);
    } else if (v && typeof v === "object") {
      for (const key in v) {
        if (key.includes("\u0000")) return true;
        stack.push((v as Record<string, unknown>)[key]);
      }
    }
  }
  return false;
}

/**
 * Where in a JSON value the first NUL character is ("input.uname", "ids[2]"),
 * or undefined. The common case (none) costs one walk without bookkeeping.
 */
export function findNul(value: unknown, at: string): string | undefined {
  if (!hasNul(value)) return undefined;
  // Found: walk again, spelling out the path (each node: its parent's index and its own key).
  const parents: number[] = [-1];
  const keys: string[] = [at];
  const stack: [unknown, number][] = [[value, 0]];
  const pathOf = (index: number, last = ""): string => {
    let path = last;
    for (let i = index; i >= 0; i = parents[i]!) path = keys[i]! + path;
    return path;
  };
  while (stack.length > 0) {
    const [v, index] = stack.pop()!;
    if (typeof v === "string") {
      if (v.includes("\u0000")) return pathOf(index);
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) {
        stack.push([v[i], keys.push(`[${i}]`) - 1]);
        parents.push(index);
      }
    } else if (v && typeof v === "object") {
      for (const [key, inner] of Object.entries(v).reverse()) {
        if (key.includes("\u0000")) return pathOf(index, `.${JSON.stringify(key)}`);
        stack.push([inner, keys.push(`.${key}`) - 1]);
        parents.push(index);
      }
    }
  }
  return undefined;
}

/** String literals of the document (arguments, defaults, list and object values). */
export const noNulLiteralsRule: ValidationRule = (context: ValidationContext): ASTVisitor => ({
  StringValue(node, _key, parent, _path, ancestors) {
    if (!node.value.includes("\u0000")) return;
    const arg = context.getArgument();
    const field = context.getFieldDef();
    // The input fields on the way from the argument to this string: "input.currency".
    const inner: string[] = [];
    for (const a of [...ancestors, parent]) if (a && !Array.isArray(a) && (a as ASTNode).kind === Kind.OBJECT_FIELD) inner.push((a as ObjectFieldNode).name.value);
    const at = arg && inner.length ? ` (at ${[arg.name, ...inner].join(".")})` : "";
    const where = arg && field ? `the value of argument "${arg.name}"${at} of field "${field.name}"` : "a string in the document";
    context.reportError(
      new GraphQLError(`${where[0]!.toUpperCase()}${where.slice(1)} contains a NUL character (\\u0000), which the database cannot store.`, {
        nodes: [node],
        extensions: { code: ErrorCode.BAD_USER_INPUT },
      }),
    );
  },
});

/** Refuses a request whose variables hold a NUL character, naming the variable and the place in it (HTTP 400). */
export function refuseNulVariables(variables: unknown): void {
  if (!variables || typeof variables !== "object" || Array.isArray(variables)) return;
  for (const [name, value] of Object.entries(variables)) {
    const at = findNul(value, name);
    if (!at) continue;
    const where = at === name ? "" : ` (at ${at})`;
    throw new SafeError(`Variable "$${name}" contains a NUL character (\\u0000)${where}, which the database cannot store.`, {
      statusCode: 400,
      code: ErrorCode.BAD_USER_INPUT,
    });
  }
}
