import { isPromiseLike } from "grafast";
import { Kind, type DocumentNode } from "graphql";
import { runNotingCommits, type CommittedMoney } from "../money/committed.js";

/** Where a request's money commits travel from execution to masking, on the error object itself. */
const COMMITTED = Symbol("hub.committedMoney");

/** The money the request of this error had committed when it failed, if any. */
export function committedOf(error: object): readonly CommittedMoney[] | undefined {
  return (error as { [COMMITTED]?: CommittedMoney[] })[COMMITTED];
}

const hasMutation = (document: DocumentNode): boolean =>
  document.definitions.some((definition) => definition.kind === Kind.OPERATION_DEFINITION && definition.operation === "mutation");

/**
 * Each execution notes what money it commits (src/money/committed.ts); when
 * its result has errors and something committed, each error is stamped with
 * it, so maskError answers OUTCOME_COMMITTED instead of a retryable code.
 */
export const CommittedMoneyPlugin: GraphileConfig.Plugin = {
  name: "HubCommittedMoneyPlugin",
  version: "0.1.0",
  grafast: {
    middleware: {
      execute(next, event) {
        // Only a mutation moves money: queries skip the per-request store (AsyncLocalStorage has a cost on Node 20).
        if (!hasMutation(event.args.document)) return next();
        const commits: CommittedMoney[] = [];
        const stamp = <R>(result: R): R => {
          const errors = (result as { errors?: readonly object[] } | null)?.errors;
          if (errors && commits.length) for (const error of errors) Object.defineProperty(error, COMMITTED, { value: commits, configurable: true });
          return result;
        };
        const result = runNotingCommits(commits, () => next());
        return isPromiseLike(result) ? result.then(stamp) : stamp(result);
      },
    },
  },
};
