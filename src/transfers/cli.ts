import type pg from "pg";
import { queryFile } from "../db/query-files.js";

const LIST_TRANSFERS = queryFile("transfer-list");

/** One line of `hub transfers list`: an outbox item and what it is about. */
export interface TransferListRow {
  id: string;
  kind: string;
  status: string;
  casino: string;
  /** The withdrawal request id, the casino's take request id, or the casino's transfer id. */
  subject: string | null;
  amount: number | null;
  currency_key: string | null;
  attempts: number;
  last_error: string | null;
  next_attempt_at: Date;
  updated_at: Date;
}

/** Every item still PENDING or FAILED, then the `done` most recent DONE ones, newest first. */
export async function listTransfers(pool: Pick<pg.Pool, "query">, done = 100): Promise<TransferListRow[]> {
  const { rows } = await pool.query<TransferListRow>(
    LIST_TRANSFERS,
    [done],
  );
  return rows;
}
