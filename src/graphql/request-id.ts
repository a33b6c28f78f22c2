import { isPromiseLike } from "grafast";
import type { PluginContext } from "./context.js";

/** Where the request id travels from execution to masking, on the error object itself. */
const REQUEST_ID = Symbol("hub.requestId");

/** The id of the request whose result held this error (stamped by ErrorRequestIdPlugin). */
export function requestIdOf(error: object): string | undefined {
  return (error as { [REQUEST_ID]?: string })[REQUEST_ID];
}

/**
 * maskError sees only the error; this middleware stamps each error of a result
 * with its request's id (from the GraphQL context) so the log line of a masked
 * error names the request. It touches nothing on successful results.
 */
export const ErrorRequestIdPlugin: GraphileConfig.Plugin = {
  name: "HubErrorRequestIdPlugin",
  version: "0.1.0",
  grafast: {
    middleware: {
      execute(next, event) {
        const requestId = (event.args.contextValue as Partial<PluginContext> | undefined)?.requestId;
        const stamp = <R>(result: R): R => {
          const errors = (result as { errors?: readonly object[] } | null)?.errors;
          if (errors) for (const error of errors) Object.defineProperty(error, REQUEST_ID, { value: requestId, configurable: true });
          return result;
        };
        const result = next();
        return isPromiseLike(result) ? result.then(stamp) : stamp(result);
      },
    },
  },
};
