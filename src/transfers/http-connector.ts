import type { CasinoConnector, ConnectorSettings, IncomingPage, IncomingTransfer, LookupOutcome, OutgoingOutcome, OutgoingTransfer, TakeOutcome, TakeRequest, TakeRequestPage } from "./connector.js";
import { OutcomeUnknownError } from "./connector.js";
import { AnswerTooLargeError, CASINO_ANSWER_MAX_BYTES, readBoundedText } from "../bounded-fetch.js";
import { ErrorCode } from "../errors.js";

/**
 * The reference connector: a small JSON protocol over HTTP that a casino
 * implements beside its own API (README: "Deposits and withdrawals"). Every
 * path is under the casino's transfer URL (hub.casino_transfer_config.url,
 * else <base URL>/hub/transfers); every request carries
 * `Authorization: Bearer <the controller's API key>`.
 *
 *   GET  {url}/incoming?cursor=&limit=   → { transfers: [{ id, uname, experience, currencyKey, amount }], cursor, more }
 *   POST {url}/incoming/{id}/ack         → 2xx
 *   POST {url}/outgoing  { idempotencyKey, uname, currencyKey, amount, expiresAt }
 *                                         → { status: "COMPLETED", id } | { status: "REFUSED", reason }
 *   GET  {url}/outgoing/{idempotencyKey}  → the same, or 404 { status: "NOT_FOUND" }
 *   GET  {url}/take-requests?cursor=&limit= → { takeRequests: [{ id, uname, experience, currencyKey, amount }], cursor, more }
 *   POST {url}/take-requests/{id}/transfer { amount, expiresAt }
 *                                         → { status: "COMPLETED", id } | { status: "REFUSED", reason, takeRequestStatus? }
 *   GET  {url}/take-requests/{id}/transfer → the same, or 404 { status: "NOT_FOUND" }
 *   POST {url}/take-requests/{id}/reject { reason } → 2xx
 *
 * Anything else (timeout, reset, 5xx, an answer that is not one of these) is
 * an unknown outcome: the worker asks again later with the same key. So is an
 * answer over CASINO_ANSWER_MAX_BYTES (1 MiB): it is read only that far, and
 * nothing of it is used. The time limit (settings.timeoutMs) covers the whole
 * answer, body included.
 */
export const INCOMING_PAGE_SIZE = 100;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function defaultTransferUrl(baseUrl: string): string {
  return `${baseUrl.replace(/\/+$/, "")}/hub/transfers`;
}

type Call = (method: "GET" | "POST", path: string, body?: unknown) => Promise<{ status: number; json: unknown }>;

/** One JSON call to the casino; anything but an HTTP answer is an unknown outcome. */
function createCall(settings: ConnectorSettings & { url: string }): Call {
  const base = settings.url.replace(/\/+$/, "");
  const headers: Record<string, string> = { accept: "application/json" };
  if (settings.apiKey) headers.authorization = `Bearer ${settings.apiKey}`;
  return async function call(method, path, body) {
    let response: Response;
    try {
      response = await fetch(`${base}${path}`, {
        method,
        headers: body === undefined ? headers : { ...headers, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(settings.timeoutMs),
      });
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      const what = (error as Error).name === "TimeoutError" ? `no answer within ${settings.timeoutMs} ms` : (cause?.code ?? cause?.message ?? (error as Error).message);
      throw new OutcomeUnknownError(`${method} ${path}: ${what}`, { cause: error });
    }
    let text: string;
    try {
      text = await readBoundedText(response, CASINO_ANSWER_MAX_BYTES);
    } catch (error) {
      if (error instanceof AnswerTooLargeError) {
        throw new OutcomeUnknownError(`${ErrorCode.CASINO_ANSWER_TOO_LARGE}: casino ${settings.casinoId} answered ${method} ${path} with too much: ${error.message}`, { cause: error });
      }
      const what = (error as Error).name === "TimeoutError" ? `the answer did not arrive whole within ${settings.timeoutMs} ms` : `the answer was cut off (${(error as Error).message})`;
      throw new OutcomeUnknownError(`${method} ${path}: ${what}`, { cause: error });
    }
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: response.status, json };
  };
}

function unexpected(what: string, status: number, json: unknown): OutcomeUnknownError {
  const shown = JSON.stringify(json) ?? "no JSON body";
  return new OutcomeUnknownError(`${what}: HTTP ${status}, ${shown.length > 200 ? `${shown.slice(0, 197)}...` : shown}`);
}

function takeOutcome(what: string, status: number, json: unknown): TakeOutcome {
  const body = json as { status?: unknown; id?: unknown; reason?: unknown; takeRequestStatus?: unknown } | undefined;
  // The original's transfer ids are UUIDs; another id is not an answer the hub can record.
  if (status === 200 && body?.status === "COMPLETED" && typeof body.id === "string" && UUID.test(body.id)) return { status: "COMPLETED", mpTransferId: body.id.toLowerCase() };
  if (status < 500 && body?.status === "REFUSED") {
    return {
      status: "REFUSED",
      reason: typeof body.reason === "string" ? body.reason.slice(0, 500) : "refused",
      ...(typeof body.takeRequestStatus === "string" ? { takeRequestStatus: body.takeRequestStatus } : {}),
    };
  }
  throw unexpected(what, status, json);
}

function outcome(what: string, status: number, json: unknown): OutgoingOutcome {
  const body = json as { status?: unknown; id?: unknown; reason?: unknown } | undefined;
  if (status === 200 && body?.status === "COMPLETED" && typeof body.id === "string" && body.id.length > 0) return { status: "COMPLETED", mpTransferId: body.id };
  // A refusal is final only when the casino says so in the protocol's words; a
  // bare 4xx (wrong key, wrong URL) is a configuration fault and is retried.
  if (status < 500 && body?.status === "REFUSED") return { status: "REFUSED", reason: typeof body.reason === "string" ? body.reason.slice(0, 500) : "refused" };
  throw unexpected(what, status, json);
}

export function createHttpConnector(settings: ConnectorSettings): CasinoConnector {
  if (!settings.url) {
    throw new OutcomeUnknownError(`casino ${settings.casinoId} has no transfer URL: give it a base URL (hubAddCasino) or a url (hubSetCasinoTransfers)`);
  }
  const call = createCall({ ...settings, url: settings.url });
  return {
    async fetchIncoming(cursor) {
      const query = new URLSearchParams({ limit: String(INCOMING_PAGE_SIZE) });
      if (cursor !== null) query.set("cursor", cursor);
      const { status, json } = await call("GET", `/incoming?${query}`);
      const body = json as { transfers?: unknown; cursor?: unknown; more?: unknown } | undefined;
      if (status !== 200 || !Array.isArray(body?.transfers)) throw unexpected("GET /incoming", status, json);
      const page: IncomingPage = {
        transfers: body.transfers as IncomingTransfer[],
        cursor: typeof body.cursor === "string" ? body.cursor : cursor,
        more: body.more === true,
      };
      return page;
    },
    async acknowledge(mpTransferId) {
      const { status, json } = await call("POST", `/incoming/${encodeURIComponent(mpTransferId)}/ack`);
      if (status < 200 || status > 299) throw unexpected("POST /incoming/:id/ack", status, json);
    },
    async send(transfer: OutgoingTransfer) {
      const { status, json } = await call("POST", "/outgoing", {
        idempotencyKey: transfer.idempotencyKey,
        uname: transfer.uname,
        currencyKey: transfer.currencyKey,
        amount: transfer.amount,
        expiresAt: transfer.expiresAt.toISOString(),
      });
      return outcome("POST /outgoing", status, json);
    },
    async lookup(idempotencyKey): Promise<LookupOutcome> {
      const { status, json } = await call("GET", `/outgoing/${encodeURIComponent(idempotencyKey)}`);
      if (status === 404 && (json as { status?: unknown } | undefined)?.status === "NOT_FOUND") return { status: "NOT_FOUND" };
      return outcome("GET /outgoing/:key", status, json);
    },
    async fetchTakeRequests(cursor): Promise<TakeRequestPage> {
      const query = new URLSearchParams({ limit: String(INCOMING_PAGE_SIZE) });
      if (cursor !== null) query.set("cursor", cursor);
      const { status, json } = await call("GET", `/take-requests?${query}`);
      const body = json as { takeRequests?: unknown; cursor?: unknown; more?: unknown } | undefined;
      if (status !== 200 || !Array.isArray(body?.takeRequests)) throw unexpected("GET /take-requests", status, json);
      return { takeRequests: body.takeRequests as TakeRequest[], cursor: typeof body.cursor === "string" ? body.cursor : cursor, more: body.more === true };
    },
    async transferTake(transfer) {
      const { status, json } = await call("POST", `/take-requests/${encodeURIComponent(transfer.takeRequestId)}/transfer`, {
        uname: transfer.uname,
        currencyKey: transfer.currencyKey,
        amount: transfer.amount,
        expiresAt: transfer.expiresAt.toISOString(),
      });
      return takeOutcome("POST /take-requests/:id/transfer", status, json);
    },
    async lookupTake(takeRequestId) {
      const { status, json } = await call("GET", `/take-requests/${encodeURIComponent(takeRequestId)}/transfer`);
      if (status === 404 && (json as { status?: unknown } | undefined)?.status === "NOT_FOUND") return { status: "NOT_FOUND" as const };
      return takeOutcome("GET /take-requests/:id/transfer", status, json);
    },
    async rejectTake(takeRequestId, reason) {
      const { status, json } = await call("POST", `/take-requests/${encodeURIComponent(takeRequestId)}/reject`, { reason });
      if (status < 200 || status > 299) throw unexpected("POST /take-requests/:id/reject", status, json);
    },
  };
}
