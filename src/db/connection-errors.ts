import fs from "node:fs";
import { HubError } from "../errors.js";
import { redactUrl } from "../config.js";

/** What node-postgres makes of a URL's TLS parameters: the CA file, and whether TLS is asked for at all. */
function tlsOf(url: string): { ca: string | undefined; tls: boolean } {
  let ca: string | undefined;
  let mode: string | null = null;
  try {
    const params = new URL(url).searchParams;
    ca = params.get("sslrootcert") ?? undefined;
    mode = params.get("sslmode") ?? params.get("ssl");
  } catch {
    // A URL that parse.postgresUrl accepted always parses; nothing to add otherwise.
  }
  return { ca, tls: ca !== undefined || (mode !== null && mode !== "disable" && mode !== "false" && mode !== "0") };
}

/** Node's codes for a server certificate it could not verify (tls.connect's errors). */
const CERTIFICATE_CODES = new Set([
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "CERT_SIGNATURE_FAILURE",
]);

/**
 * Read every TLS file a URL names now, as node-postgres would at its first
 * connection (it reads sslrootcert, sslcert and sslkey per connection, and a
 * missing file would surface from deep inside a pool).
 */
export function checkTlsFiles(variable: string, url: string): void {
  let params: URLSearchParams;
  try {
    params = new URL(url).searchParams;
  } catch {
    return;
  }
  for (const parameter of ["sslrootcert", "sslcert", "sslkey"]) {
    const file = params.get(parameter);
    if (file === null) continue;
    try {
      fs.readFileSync(file);
    } catch (error) {
      throw new HubError(
        "HUB_DB_TLS",
        `${variable} (${redactUrl(url)}) names a TLS file that cannot be read: ${parameter}=${file} (${(error as Error).message}). ` +
          "The path is read by the hub's process on this machine: check it and its permissions.",
        { cause: error },
      );
    }
  }
}

/**
 * The start-up error for a connection that failed: HUB_DB_TLS when TLS was
 * asked for and the server's certificate did not verify (naming the CA file
 * it was checked against), HUB_DB_CONNECT otherwise. Never the password.
 */
export function connectFailed(variable: string, url: string, error: unknown): HubError {
  const message = (error as Error)?.message ?? String(error);
  const code = (error as { code?: unknown })?.code;
  const { ca, tls } = tlsOf(url);
  if (tls && ((typeof code === "string" && CERTIFICATE_CODES.has(code)) || /certificate|self[- ]signed/i.test(message))) {
    const against = ca ? `the CA file ${ca} (sslrootcert)` : "the system's trusted CAs (no sslrootcert in the URL)";
    return new HubError(
      "HUB_DB_TLS",
      `Cannot connect to ${variable} (${redactUrl(url)}): the server's TLS certificate did not verify against ${against}: ${message}` +
        `${typeof code === "string" ? ` [${code}]` : ""}. Set sslrootcert to the CA that signed the server's certificate (your provider publishes it), and connect by the host name the certificate names.`,
      { cause: error },
    );
  }
  return new HubError("HUB_DB_CONNECT", `Cannot connect to ${variable} (${redactUrl(url)}): ${message}`, { cause: error });
}
