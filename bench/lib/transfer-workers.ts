/**
 * The two transfer workers bench/transfer-worker-vs-graphile-worker.ts
 * compares, started the same way in the bench's process and in the child it
 * SIGKILLs: the hub's (startTransferWorker) and graphile-worker running the
 * hub worker's withdrawal attempt as a task.
 */
import pg from "pg";
import { createLogger } from "../../dist/src/logger.js";
import { startTransferWorker } from "../../dist/src/transfers/worker.js";
import type { ResolvedTransferOptions } from "../../dist/src/transfers/options.js";
import { connectorForCasino } from "../../dist/src/transfers/connectors.js";
import { completeWithdrawal, extendSendWindow, loadWithdrawal, refundWithdrawal } from "../../dist/src/transfers/withdrawals.js";
import type { OutgoingOutcome } from "../../dist/src/transfers/connector.js";

export type Kind = "hub" | "graphile";
export interface Worker {
  stop(): Promise<void>;
}

export const GW_APP = "graphile-worker";
export const GW_INSTALL = "npm install --no-save graphile-worker@0.16.6   # 0.18 needs Node >= 22.18";

export type GraphileWorker = {
  run(options: Record<string, unknown>): Promise<{ stop(): Promise<void>; promise: Promise<void> }>;
  runMigrations(options: Record<string, unknown>): Promise<void>;
  Logger: new (factory: () => (level: string, message: string) => void) => unknown;
};

/** graphile-worker, from GRAPHILE_WORKER (a path to its dist/index.js) or node_modules; exits 2 with how to install it otherwise. */
export async function loadGraphileWorker(): Promise<GraphileWorker> {
  const where = process.env.GRAPHILE_WORKER ?? "graphile-worker";
  try {
    const mod = (await import(where)) as Partial<GraphileWorker> & { default?: GraphileWorker };
    return (mod.run ? mod : mod.default) as GraphileWorker;
  } catch (error) {
    process.stderr.write(`graphile-worker could not be loaded from ${where} (${(error as Error).message}). Install it for the run only:\n  ${GW_INSTALL}\n`);
    process.exit(2);
  }
}

export const quietLogger = (gw: GraphileWorker) =>
  new gw.Logger(() => (level, message) => {
    if (level === "error") console.error(message);
  });

/** The hub worker's attempt, as a graphile-worker task: the same calls and records, retried by graphile-worker. */
function withdrawTask(pool: pg.Pool, options: ResolvedTransferOptions) {
  return async (payload: unknown, helpers: { job: { attempts: number } }) => {
    const id = (payload as { id: string }).id;
    const w = await loadWithdrawal(pool, id);
    if (!w || w.status !== "PENDING") return;
    const connector = await connectorForCasino(pool, w.casino_id, options);
    let outcome: OutgoingOutcome | undefined;
    if (helpers.job.attempts > 1) {
      // As the hub worker does after an unknown outcome: ask first.
      const found = await connector.lookup(id).catch(() => undefined);
      if (found && found.status !== "NOT_FOUND") outcome = found;
    }
    if (!outcome) {
      const expiresAt = new Date(Date.now() + options.requestTimeoutMs);
      await extendSendWindow(pool, id, expiresAt);
      outcome = await connector.send({ idempotencyKey: id, uname: w.uname, currencyKey: w.currency_key, amount: w.amount, expiresAt });
    }
    const client = await pool.connect();
    try {
      await client.query("begin");
      if (outcome.status === "COMPLETED") await completeWithdrawal(client, id, outcome.mpTransferId);
      else await refundWithdrawal(client, w, "bench", outcome.reason);
      await client.query("commit");
    } catch (error) {
      await client.query("rollback").catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  };
}

export async function startWorker(kind: Kind, url: string, options: ResolvedTransferOptions, gw: GraphileWorker): Promise<Worker> {
  if (kind === "hub") return startTransferWorker(url, options, createLogger({ level: "warn", pretty: false, fd: 2 }));
  const pgPool = new pg.Pool({ connectionString: url, max: options.concurrency + 2, application_name: GW_APP });
  const taskPool = new pg.Pool({ connectionString: url, max: options.concurrency + 1, application_name: `${GW_APP}:task` });
  const runner = await gw.run({
    pgPool,
    logger: quietLogger(gw),
    concurrency: options.concurrency,
    noHandleSignals: true,
    pollInterval: 2000,
    taskList: { hub_withdraw: withdrawTask(taskPool, options) },
  });
  return {
    async stop() {
      await runner.stop();
      await Promise.all([pgPool.end(), taskPool.end()]);
    },
  };
}
