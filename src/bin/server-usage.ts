/**
 * The command line of `node dist/server.js`: none. The server is configured by
 * environment variables only, so an argument such as `--port 5000` was a
 * mistake that would otherwise start a server on other settings than the ones
 * its operator believes; `--help` says where the settings are instead of
 * starting (and creating an embedded database in the working directory).
 */
import { describeValue, HubError } from "../errors.js";

export const SERVER_USAGE = `Usage: node dist/server.js   (npm start)

Starts the hub. It takes no arguments: it is configured by environment
variables, read at start-up (docs/configuration.md):

  DATABASE_URL, SUPERUSER_DATABASE_URL
                   Postgres to use; both unset: the embedded Postgres
                   (refused in production unless HUB_EMBEDDED_POSTGRES=on)
  HUB_EMBEDDED_POSTGRES
                   on or off: the embedded Postgres allowed without the URLs
                   (default on, except in production)
  DIRECT_DATABASE_URL, HUB_DATABASE_POOLER
                   behind a transaction pooler (PgBouncer): transaction, and
                   a superuser URL straight to Postgres (docs/deployment.md)
  HUB_MAX_CONNECTIONS  the most connections this instance opens (default 39)
  HUB_DATA_DIR     the embedded Postgres's data (default ./.hub)
  PORT, HOST       where to listen (default 4000 on 127.0.0.1; 0.0.0.0 in production)
  NODE_ENV         development (default), production or test
  LOG_LEVEL        fatal, error, warn, info (default), debug, trace or silent;
                   debug or trace: a failed start prints its stack too
  LOG_PRETTY       true or false (default: pretty in a development terminal)
  HUB_PLAYGROUND, HUB_INTROSPECTION, HUB_DASHBOARD
                   on or off (HUB_DASHBOARD: or the path to serve it at)
  HUB_LIVENESS_PATH, HUB_READINESS_PATH
                   the health checks (default /healthz, /readyz): on, off or a path
  HUB_DRAIN_MS     how long a stopping server keeps serving, readiness 503
                   (default 5000 in production, else 0)
  HUB_TRUST_PROXY  the proxies whose X-Forwarded-For / X-Request-ID are believed:
                   true, a number of hops, or addresses and CIDR ranges
  HUB_SOCKET_REBALANCE
                   on or off: move WebSockets off an instance holding more than
                   its share (default on in production)
  HUB_CONFIG       a module whose default export is the ServerOptions to start with
  HUB_EXAMPLES     off: the bare hub instead of the demo plugins and routes

Operators' keys, player sessions, casinos and balances: hub --help
(node dist/cli.js --help).
`;

/** "help" for -h/--help; throws HUB_CLI_USAGE for any other argument. */
export function serverArguments(argv: readonly string[]): "help" | "start" {
  if (argv.length === 0) return "start";
  if (argv.length === 1 && (argv[0] === "--help" || argv[0] === "-h")) return "help";
  throw new HubError(
    "HUB_CLI_USAGE",
    `node dist/server.js takes no arguments; received ${argv.map((a) => describeValue(a)).join(" ")}. ` +
      "It is configured by environment variables (PORT=5000 node dist/server.js); node dist/server.js --help lists them.",
  );
}
