/** A row of the outbox (hub.transfer_job), as the worker claims it; its own file, read by the worker and the take attempts. */
export interface TransferJob {
  id: string;
  kind: "WITHDRAWAL" | "ACKNOWLEDGE" | "POLL" | "INCOMING" | "TAKE_POLL" | "TAKE";
  casino_id: string;
  withdrawal_request_id: string | null;
  take_request_id: string | null;
  mp_transfer_id: string | null;
  cursor: string | null;
  /** Attempts before this one. */
  attempts: number;
}
