import type { Express } from "express";
import http from "node:http";

/** Request and response classes for Node's HTTP server (its `IncomingMessage` and `ServerResponse` options). */
export type MessageClasses = Pick<http.ServerOptions, "IncomingMessage" | "ServerResponse">;

/**
 * Request and response classes for Node's HTTP server whose instances are
 * born with the Express app's prototypes.
 *
 * Express's `app.handle` gives each request and response the app's prototypes
 * with `Object.setPrototypeOf`, and on V8 that costs more than all the rest of
 * Express. With the objects built with those prototypes already, Express's
 * `setPrototypeOf` is a no-op (a `GET /health` of the bench's Express app
 * takes about a third of the CPU: bench/results/private-internals.md).
 *
 * Classes rather than constructor functions given `app.request` as their
 * `prototype`: V8 sizes a class's objects from its base constructor, a bare
 * function's objects it sizes for none of the fields Node then adds, which
 * loses part of the gain and also slows Fastify's handling of /graphql.
 * So each class's prototype takes the place of `app.request` /
 * `app.response`: the same parent (Express's request / response), the same
 * own properties (`app`), no `constructor` of its own, and mounted sub-apps
 * chain to it as they would to `app.request` itself.
 *
 * This relies on Express's own workings, not on its documented interface:
 * `app.request` / `app.response` being plain properties it reads back in
 * `app.handle` for that `setPrototypeOf`. test/private-internals.test.ts
 * fails when the installed Express does it differently. Where Fastify's
 * server options cannot be set (the classes are not passed), Express gives
 * the prototypes itself, as in any Express app.
 */
export function expressMessageClasses(app: Express): MessageClasses {
  class ExpressRequest extends http.IncomingMessage {}
  class ExpressResponse extends http.ServerResponse {}
  adoptAsAppPrototype(app, "request", ExpressRequest.prototype);
  adoptAsAppPrototype(app, "response", ExpressResponse.prototype);
  return { IncomingMessage: ExpressRequest, ServerResponse: ExpressResponse as typeof http.ServerResponse };
}

function adoptAsAppPrototype(app: Express, key: "request" | "response", proto: object): void {
  const original: object = app[key];
  delete (proto as { constructor?: unknown }).constructor;
  Object.setPrototypeOf(proto, Object.getPrototypeOf(original));
  Object.defineProperties(proto, Object.getOwnPropertyDescriptors(original));
  (app as unknown as Record<string, object>)[key] = proto;
}
