/**
 * buildHub: a Fastify instance made by the hub, with the instance options it
 * is tuned for (body limit, request timeout and Node's sweep of it, header
 * size, request ids, the lazy request logger, the Express app's message
 * classes), the hub plugin registered on it and loaded, not yet listening.
 * Routes, hooks and plugins may still be added before listen() or ready().
 */
import type { FastifyInstance } from "fastify";
import { createFastify } from "../adapters/fastify.js";
import { closeCore, loggerFor, MAX_BODY, prepareHub, type HubInternals, type PreparedHub } from "./hub-core.js";
import { createHubPlugin, PREPARED } from "./hub-plugin.js";
import { resolveOptions, type ServerOptions } from "./options.js";

/** buildHub, with the hub it prepared (startAndListen reads its options and database). */
export async function buildPreparedHub(rawOptions: ServerOptions | undefined, internals: HubInternals, entry = "buildHub"): Promise<{ app: FastifyInstance; hub: PreparedHub }> {
  const options = resolveOptions(rawOptions, process.env, entry);
  const log = loggerFor(options);
  const hub = await prepareHub(options, log, internals);
  let app: FastifyInstance | undefined;
  try {
    app = createFastify({
      logger: log,
      bodyLimit: MAX_BODY,
      requestTimeoutMs: options.requestTimeoutMs,
      messageClasses: hub.expressApp?.messageClasses,
      trustProxy: hub.trustProxy,
    });
    await app.register(createHubPlugin(internals), { [PREPARED]: hub });
    return { app, hub };
  } catch (error) {
    // Fastify, once there, runs the hooks of whatever was mounted; closeCore runs once either way.
    if (app) await app.close().catch((closeError: unknown) => log.warn({ err: closeError }, "error while releasing resources"));
    await closeCore(hub.core, log, internals);
    throw error;
  }
}
