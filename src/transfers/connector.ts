/**
 * How the hub talks to a casino about money crossing the boundary. One
 * connector per casino (hub.casino_transfer_config.connector names its kind);
 * the hub ships the HTTP one (http-connector.ts), and ServerOptions.transfers.connectors
 * adds others.
 *
 * Every call that can move money carries an idempotency key, so the worker may
 * repeat it after any failure: the casino applies a key at most once and answers
 * a repeat with the first outcome.
 */

/** A transfer the casino reports as moved from a player into an experience. */
export interface IncomingTransfer {
  /** The casino's own id for the transfer (mpTransferId). */
  id: string;
  uname: string;
  /** The experience's name in the hub (created when missing). */
  experience: string;
  currencyKey: string;
  /** Whole base units. */
  amount: number;
}

export interface IncomingPage {
  transfers: IncomingTransfer[];
  /** Where the next fetch starts; unchanged when nothing new. */
  cursor: string | null;
  /** More are waiting right now: fetch again without the poll pause. */
  more: boolean;
}

export interface OutgoingTransfer {
  /** The withdrawal request id: the same on every attempt. */
  idempotencyKey: string;
  uname: string;
  currencyKey: string;
  amount: number;
  /** The casino must refuse to apply this key for the first time after this instant (its clock). */
  expiresAt: Date;
}

/** A definitive answer about one outgoing transfer. */
export type OutgoingOutcome =
  | { status: "COMPLETED"; mpTransferId: string }
  | { status: "REFUSED"; reason: string };

/** What a lookup by idempotency key found. */
export type LookupOutcome = OutgoingOutcome | { status: "NOT_FOUND" };

/** The casino asks the hub to take a player's funds back (the original's take request). */
export interface TakeRequest {
  /** The casino's id of the take request (a UUID): the hub acts on each once. */
  id: string;
  uname: string;
  /** The experience's name in the hub (created when missing). */
  experience: string;
  currencyKey: string;
  /** Whole base units; null: the player's whole balance. */
  amount: number | null;
}

export interface TakeRequestPage {
  takeRequests: TakeRequest[];
  cursor: string | null;
  more: boolean;
}

export interface TakeTransfer {
  /** The take request's id at the casino: the idempotency key of its transfer. */
  takeRequestId: string;
  uname: string;
  currencyKey: string;
  /** What the hub reserved: whole base units. */
  amount: number;
  /** The casino must refuse to apply it for the first time after this instant (its clock). */
  expiresAt: Date;
}

/** A definitive answer about a take request's transfer. */
export type TakeOutcome =
  | { status: "COMPLETED"; mpTransferId: string }
  /** takeRequestStatus: the casino's status of its take request, when it says (USER_CANCELED: the player withdrew it). */
  | { status: "REFUSED"; reason: string; takeRequestStatus?: string };

export interface CasinoConnector {
  /** New incoming transfers after cursor (null: from the start). */
  fetchIncoming(cursor: string | null): Promise<IncomingPage>;
  /** Tell the casino the hub has credited this incoming transfer. */
  acknowledge(mpTransferId: string): Promise<void>;
  /** Send a withdrawal; resolves only with a definitive outcome, rejects when the outcome is unknown. */
  send(transfer: OutgoingTransfer): Promise<OutgoingOutcome>;
  /** What the casino did with a key; rejects when it cannot tell right now. */
  lookup(idempotencyKey: string): Promise<LookupOutcome>;
  /**
   * Take requests (optional: a casino that has none leaves them out, and
   * hubSetCasinoTransfers refuses takeRequests: true for it). The same rules
   * as for withdrawals: the transfer is applied at most once per take request,
   * a repeat answers the first outcome, and an unknown outcome rejects.
   */
  fetchTakeRequests?(cursor: string | null): Promise<TakeRequestPage>;
  transferTake?(transfer: TakeTransfer): Promise<TakeOutcome>;
  lookupTake?(takeRequestId: string): Promise<TakeOutcome | { status: "NOT_FOUND" }>;
  /** Tell the casino the hub will not transfer it (reason: why); resolves once the casino has recorded it. */
  rejectTake?(takeRequestId: string, reason: string): Promise<void>;
}

/** What a connector factory receives about its casino. */
export interface ConnectorSettings {
  casinoId: string;
  /** hub.casino_transfer_config.url, else the casino's base URL. */
  url: string | null;
  /** The controller's API key at the casino (hubAddCasino's apiKey); null when none was given. */
  apiKey: string | null;
  /** Each call's time limit, ms. */
  timeoutMs: number;
}

export type ConnectorFactory = (settings: ConnectorSettings) => CasinoConnector;

/**
 * The outcome of a call is unknown (timeout, 5xx, connection reset, malformed
 * answer): the casino may or may not have applied it. Retried with the same key.
 */
export class OutcomeUnknownError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "OutcomeUnknownError";
  }
}
