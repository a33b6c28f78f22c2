/**
 * Every error the hub raises on its own, in one place. Each has a stable code
 * (for logs, alerts and tests) and a message that says what was received and
 * what was expected, so an operator can act on it without reading the source.
 */
export type HubErrorCode =
  | "HUB_CONFIG_INVALID"
  | "HUB_OPTION_UNKNOWN"
  | "HUB_OPTION_INVALID"
  | "HUB_DB_ROLE"
  | "HUB_DB_CONNECT"
  | "HUB_EMBEDDED_PG"
  | "HUB_MIGRATION_FAILED"
  | "HUB_MIGRATION_CHANGED"
  | "HUB_MIGRATION_NAME"
  | "HUB_NOT_STARTED"
  | "HUB_CLI_USAGE";

export class HubError extends Error {
  readonly code: HubErrorCode;
  constructor(code: HubErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "HubError";
    this.code = code;
  }
}

/** Quote a received value for an error message without flooding the log. */
export function describeValue(value: unknown): string {
  if (value === undefined) return "undefined";
  let text: string;
  try {
    text = typeof value === "string" ? JSON.stringify(value) : JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}

export const configInvalid = (variable: string, received: unknown, expected: string): HubError =>
  new HubError(
    "HUB_CONFIG_INVALID",
    `Environment variable ${variable} is invalid: received ${describeValue(received)}, expected ${expected}.`,
  );

export const optionInvalid = (option: string, received: unknown, expected: string): HubError =>
  new HubError(
    "HUB_OPTION_INVALID",
    `Server option "${option}" is invalid: received ${describeValue(received)}, expected ${expected}.`,
  );
