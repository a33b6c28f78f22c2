import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance, FastifyReply } from "fastify";
import type { Logger } from "../src/logger.js";
import { pathOf } from "./graphql-path.js";

/**
 * The operator's dashboard: the files `npm run build` put in dist/dashboard,
 * read once at start and served as they are. Nothing is generated per request
 * and the page loads nothing from elsewhere, so the policy below can forbid
 * everything but this origin, and inline scripts altogether.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  // /graphql over HTTP and the subscriptions' WebSocket on the same host.
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json; charset=utf-8",
};

/** dist/dashboard of this package, from the compiled file (dist/adapters) or its source (adapters). */
export function dashboardBuildDir(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    if (fs.existsSync(path.join(dir, "package.json"))) return path.join(dir, "dist", "dashboard");
    dir = path.dirname(dir);
  }
  return path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "dashboard");
}

interface StaticFile {
  body: Buffer;
  type: string;
  /** Vite names the bundles by their content hash: they never change under a name. */
  immutable: boolean;
}

function readFiles(root: string): Map<string, StaticFile> {
  const files = new Map<string, StaticFile>();
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.isFile()) {
        const rel = path.relative(root, full).split(path.sep).join("/");
        files.set(rel, { body: fs.readFileSync(full), type: TYPES[path.extname(entry.name)] ?? "application/octet-stream", immutable: rel.startsWith("assets/") });
      }
    }
  };
  walk(root);
  return files;
}

function securityHeaders(reply: FastifyReply): FastifyReply {
  return reply
    .header("content-security-policy", DASHBOARD_CSP)
    .header("x-content-type-options", "nosniff")
    .header("referrer-policy", "no-referrer")
    .header("x-frame-options", "DENY")
    .header("cross-origin-opener-policy", "same-origin");
}

/**
 * GET <mountPath>/ and the files under it. Without a build (the server run
 * from its sources before `npm run build`), the page says how to get one.
 */
export function mountDashboard(app: FastifyInstance, mountPath: string, log: Logger, root = dashboardBuildDir()): void {
  let files: Map<string, StaticFile> | undefined;
  if (fs.existsSync(path.join(root, "index.html"))) files = readFiles(root);
  else log.warn({ dir: root }, `the dashboard is not built, so ${mountPath} only says so: run npm run build`);

  const send = (reply: FastifyReply, rel: string) => {
    const file = files?.get(rel);
    if (!files) {
      return securityHeaders(reply).code(503).type("text/plain; charset=utf-8").send("The dashboard is not built: run npm run build, then restart the hub.\n");
    }
    if (!file) {
      return reply.code(404).send({ statusCode: 404, error: "Not Found", message: `No dashboard file ${mountPath}/${rel}` });
    }
    return securityHeaders(reply)
      .header("cache-control", file.immutable ? "public, max-age=31536000, immutable" : "no-cache")
      .type(file.type)
      .send(file.body);
  };
  // The page's links are relative (./assets/…): it must be loaded from the path ending in a slash.
  app.get(mountPath, (request, reply) => {
    if (pathOf(request.url).endsWith("/")) return send(reply, "index.html");
    return reply.redirect(`${mountPath}/`, 301);
  });
  app.get(`${mountPath}/*`, (request, reply) => {
    const rel = (request.params as { "*": string })["*"];
    return send(reply, rel === "" ? "index.html" : rel);
  });
}
