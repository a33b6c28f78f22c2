/**
 * Node's `AbortController.prototype.abort`, replaced process-wide by
 * `node dist/server.js` (src/bin/process-setup.ts; importing the library
 * never does it).
 *
 * grafast aborts a fresh AbortController after every request, without a
 * reason. Node then builds the default reason, a DOMException, and captures its
 * stack: a sizeable share of a `{__typename}` request
 * (bench/results/private-internals.md). The replacement gives the same
 * reason (an AbortError DOMException with Node's message), built without a
 * stack trace; an explicit reason is passed through untouched.
 * test/private-internals.test.ts fails when Node's default reason or
 * grafast's call changes.
 */
const PATCHED = Symbol.for("hub.stacklessAbort");

/** Node's default abort reason, without its stack. */
export function stacklessAbortReason(): DOMException {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new DOMException("This operation was aborted", "AbortError");
  } finally {
    Error.stackTraceLimit = limit;
  }
}

export function installStacklessAbort(): void {
  const nativeAbort = AbortController.prototype.abort;
  if ((nativeAbort as { [PATCHED]?: boolean })[PATCHED]) return;
  const abort = function abort(this: AbortController, reason?: unknown): void {
    nativeAbort.call(this, reason === undefined ? stacklessAbortReason() : reason);
  };
  Object.defineProperty(abort, PATCHED, { value: true });
  AbortController.prototype.abort = abort;
}
