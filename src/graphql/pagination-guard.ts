/**
 * `first`, `last` and `offset` below 0 refused on every connection and list
 * field: `first: -1` would otherwise silently become `LIMIT 0`, because one
 * extra row is fetched to compute hasNextPage.
 */
import { lambda, SafeError, type FieldArg } from "grafast";
import { ErrorCode } from "../errors.js";

const PAGINATION_ARGS = ["first", "last", "offset"] as const;

function nonNegative(argName: string) {
  return (value: unknown) => {
    if (typeof value === "number" && value < 0) {
      throw new SafeError(`${argName} must not be negative; received ${value}.`, { code: ErrorCode.BAD_USER_INPUT });
    }
    return value;
  };
}

/** Wraps the plans of `first`, `last` and `offset` of connection and list fields with a check. */
export function guardPaginationArgs<Args extends Record<string, { type: unknown; applyPlan?: ((...a: any[]) => unknown) | undefined }>>(
  args: Args,
  build: GraphileBuild.Build,
  context: { scope: object },
): Args {
  const { isPgFieldConnection, isPgFieldSimpleCollection } = context.scope as { isPgFieldConnection?: boolean; isPgFieldSimpleCollection?: boolean };
  if (!isPgFieldConnection && !isPgFieldSimpleCollection) return args;
  for (const name of PAGINATION_ARGS) {
    const arg = args[name];
    const applyPlan = arg?.applyPlan;
    if (!arg || !applyPlan || arg.type !== build.graphql.GraphQLInt) continue;
    const check = nonNegative(name);
    arg.applyPlan = (parent: unknown, $target: unknown, fieldArg: FieldArg) =>
      applyPlan(parent, $target, {
        ...fieldArg,
        getRaw: ((path?: string | ReadonlyArray<string | number>) =>
          path === undefined ? lambda(fieldArg.getRaw(), check, true) : fieldArg.getRaw(path)) as FieldArg["getRaw"],
      });
  }
  return args;
}
