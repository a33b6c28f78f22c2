import {
  GraphQLError,
  Kind,
  NoSchemaIntrospectionCustomRule,
  OperationTypeNode,
  type ASTVisitor,
  type FragmentDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
} from "graphql";
import { ErrorCode } from "../errors.js";

/**
 * Cheap static limits, checked at validation time: a hostile query is refused
 * before any planning or SQL, with a message that says the limit and what the
 * query had. Valid documents are cached per query text (parse-cache.ts), so
 * a repeated query pays nothing.
 */
export interface QueryLimits {
  /** Deepest nesting of selection sets, fragments expanded (default 16). */
  maxDepth: number;
  /** Most aliased fields in one document (default 50). */
  maxAliases: number;
  /** Most field selections once fragments are expanded (default 1000): stops fragment fan-out bombs. */
  maxSelections: number;
  /** Allow __schema/__type queries (default: on outside production). */
  introspection: boolean;
}

export const DEFAULT_QUERY_LIMITS: Omit<QueryLimits, "introspection"> = { maxDepth: 16, maxAliases: 50, maxSelections: 1000 };

function limitRule(limits: QueryLimits): ValidationRule {
  return (context: ValidationContext): ASTVisitor => {
    const fragments = new Map<string, FragmentDefinitionNode>();
    for (const def of context.getDocument().definitions) {
      if (def.kind === Kind.FRAGMENT_DEFINITION) fragments.set(def.name.value, def);
    }
    let aliases = 0;
    // Depth and expanded size of a selection set; a fragment cycle is another
    // rule's error (NoFragmentCycles), so we just stop following it.
    const measure = (set: SelectionSetNode, depth: number, visiting: Set<string>, budget: { selections: number }): number => {
      let deepest = depth;
      for (const selection of set.selections) {
        if (budget.selections > limits.maxSelections) return deepest;
        if (selection.kind === Kind.FIELD) {
          budget.selections++;
          if (selection.selectionSet) deepest = Math.max(deepest, measure(selection.selectionSet, depth + 1, visiting, budget));
        } else if (selection.kind === Kind.INLINE_FRAGMENT) {
          deepest = Math.max(deepest, measure(selection.selectionSet, depth, visiting, budget));
        } else {
          const name = selection.name.value;
          const fragment = fragments.get(name);
          if (!fragment || visiting.has(name)) continue;
          visiting.add(name);
          deepest = Math.max(deepest, measure(fragment.selectionSet, depth, visiting, budget));
          visiting.delete(name);
        }
      }
      return deepest;
    };
    return {
      Field(node) {
        if (node.alias) aliases++;
      },
      OperationDefinition: {
        leave(node) {
          const budget = { selections: 0 };
          const depth = measure(node.selectionSet, 1, new Set(), budget);
          const name = node.name ? ` "${node.name.value}"` : "";
          if (depth > limits.maxDepth) {
            context.reportError(
              new GraphQLError(`Operation${name} is nested ${depth} levels deep; the limit is ${limits.maxDepth}.`, {
                nodes: [node],
                extensions: { code: ErrorCode.QUERY_TOO_DEEP, limit: limits.maxDepth, received: depth },
              }),
            );
          }
          if (budget.selections > limits.maxSelections) {
            context.reportError(
              new GraphQLError(`Operation${name} selects more than ${limits.maxSelections} fields once fragments are expanded; the limit is ${limits.maxSelections}.`, {
                nodes: [node],
                extensions: { code: ErrorCode.QUERY_TOO_LARGE, limit: limits.maxSelections },
              }),
            );
          }
        },
      },
      Document: {
        leave() {
          if (aliases > limits.maxAliases) {
            context.reportError(
              new GraphQLError(`The document uses ${aliases} aliases; the limit is ${limits.maxAliases}.`, {
                extensions: { code: ErrorCode.TOO_MANY_ALIASES, limit: limits.maxAliases, received: aliases },
              }),
            );
          }
        },
      },
    };
  };
}

/**
 * An operation whose root type the schema lacks (a subscription while the
 * schema has no Subscription type, say) passes graphql's standard rules and
 * would fail only at planning, as a server error. Refuse it here instead.
 */
const operationTypeRule: ValidationRule = (context) => ({
  OperationDefinition(node) {
    const schema = context.getSchema();
    if (schema.getRootType(node.operation)) return;
    const name = node.name ? ` "${node.name.value}"` : "";
    const kind = node.operation;
    const supported = [OperationTypeNode.QUERY, OperationTypeNode.MUTATION, OperationTypeNode.SUBSCRIPTION].filter((k) => schema.getRootType(k));
    context.reportError(
      new GraphQLError(`This server's schema has no ${kind} root type, so the ${kind} operation${name} cannot be run; it runs ${supported.join(" and ")} operations.`, {
        nodes: [node],
        extensions: { code: ErrorCode.OPERATION_TYPE_NOT_SUPPORTED, operation: kind },
      }),
    );
  },
});

/**
 * The hub's own rules. They run before graphql's standard rules (see
 * parse-cache.ts): a document they refuse never meets the standard rules,
 * whose field-merging check is quadratic in the number of fields.
 */
export function queryLimitRules(limits: QueryLimits): ValidationRule[] {
  return [operationTypeRule, limitRule(limits), ...(limits.introspection ? [] : [NoSchemaIntrospectionCustomRule])];
}
