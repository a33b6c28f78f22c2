/**
 * What a process prints when its server fails to start: one block an operator
 * can act on, instead of an uncaught exception's caret line, stack and
 * `[cause]` dump around the one useful line. `node dist/server.js` and a
 * `hub init` project's src/index.ts both print it; the stack only with
 * LOG_LEVEL=debug (or trace), for whoever is debugging the hub itself.
 */
import { HubError } from "./errors.js";
import { userFrame } from "./startup-errors.js";

/** Whether the environment asks for stacks: LOG_LEVEL debug or trace, read raw, since the failure may be LOG_LEVEL's own. */
export function wantsStartFailureStack(env: Record<string, string | undefined> = process.env): boolean {
  return env.LOG_LEVEL === "debug" || env.LOG_LEVEL === "trace";
}

/** The stack of the error and of each cause under it, as the debug setting prints them. */
function stacks(error: unknown): string {
  const parts: string[] = [];
  for (let e = error, depth = 0; e !== undefined && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    parts.push(`${depth === 0 ? "" : "caused by: "}${(e as Error).stack ?? String(e)}`);
  }
  return parts.join("\n");
}

/**
 * The block for a start-up failure, ending with a newline. A HubError is its
 * message and code on one line (the message names the file and line where it
 * knows them, and what to change); anything else also says where in the
 * user's code it was thrown, when that is known.
 */
export function formatStartFailure(error: unknown, options: { stack?: boolean } = {}): string {
  const stack = options.stack ?? wantsStartFailureStack();
  let block: string;
  if (error instanceof HubError) {
    block = `hub: ${error.message} [${error.code}]\n`;
  } else {
    const message = (error as Error | undefined)?.message ?? String(error);
    const where = userFrame(error);
    block = `hub: failed to start: ${message}${where ? ` (thrown at ${where})` : ""}\n`;
    if (!stack) block += "hub: LOG_LEVEL=debug prints the stack.\n";
  }
  return stack ? `${block}${stacks(error)}\n` : block;
}

/** Print the block to stderr and exit with status 1: for the catch of a process's start. */
export function exitOnStartFailure(error: unknown): never {
  process.stderr.write(formatStartFailure(error));
  process.exit(1);
}
