import { GraphQLError } from "graphql";
import { access, context, sideEffect, type ExecutableStep } from "grafast";
import { extendSchema, gql } from "graphile-utils";
import type pg from "pg";
import type { Identity } from "../auth/identity.js";
import { withPgPoolTransaction } from "../db/pools.js";
import { describeValue, ErrorCode } from "../errors.js";
import { clientError } from "../graphql/client-error.js";
import { classifyClientInputError } from "../graphql/mask-error.js";
import type { Logger } from "../logger.js";
import { serverOfBuild } from "../server-state.js";
import { checkIdempotencyKey, dbClaimIdempotencyKey, dbRecordIdempotentResult } from "../money/idempotency.js";
import { noteCommitted } from "../money/committed.js";
import * as parse from "../parse.js";
import { OutcomeUnknownError } from "./connector.js";
import { connectorForCasino } from "./connectors.js";
import { checkIncoming, recordDeposit, TransferRefusal } from "./deposits.js";
import type { TransferRuntime } from "./runtime.js";
import { checkTakeRequest, recordTakeRequest } from "./take-requests.js";
import { completeWithdrawal, loadWithdrawal, refundWithdrawal, requestWithdrawal, transferEndpoint } from "./withdrawals.js";

/**
 * Money in and out through GraphQL: hubRecordDeposit (a casino backend pushes
 * a deposit), hubWithdraw (a player), hubSetCasinoTransfers, hubRetryWithdrawal
 * and hubRefundWithdrawal (operators). The rows themselves (HubDeposit,
 * HubWithdrawalRequest, HubWithdrawal, HubTransferJob) are tables PostGraphile
 * exposes under row-level security.
 */

function operatorActor(identity: Identity | undefined): string {
  if (identity?.kind !== "operator") {
    throw clientError(identity ? ErrorCode.FORBIDDEN : ErrorCode.UNAUTHENTICATED, "Unauthorized: this mutation needs an operator API key (Authorization: apikey:<key>).");
  }
  return `api_key:${identity.apiKeyId}`;
}

function wholeAmount(field: string, amount: unknown): number {
  const parsed = parse.amount(amount);
  if ("expected" in parsed) {
    throw clientError(ErrorCode.INVALID_AMOUNT, `${field} must be ${parsed.expected}; received ${describeValue(amount)}. Amounts are whole base units of the currency, so 1 is the smallest.`);
  }
  return parsed.value;
}

function uuidArg(field: string, value: unknown): string {
  if (typeof value !== "string" || !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value)) {
    throw clientError(ErrorCode.BAD_USER_INPUT, `${field} must be a UUID; received ${describeValue(value)}.`);
  }
  return value.toLowerCase();
}

/** Database refusals a client can act on keep their code; everything else is the server's fault. */
async function guarded<T>(logger: Logger, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (error instanceof GraphQLError) throw error;
    if (error instanceof TransferRefusal) {
      if (error.code === ErrorCode.TRANSFER_MISMATCH || error.code === ErrorCode.TAKE_REQUEST_MISMATCH) logger.error({ code: error.code }, error.message);
      else logger.info({ code: error.code }, error.message);
      throw clientError(error.code, error.message);
    }
    const known = classifyClientInputError(error);
    if (!known) throw error;
    const message = known.sqlstate === "P0001" ? String((error as Error).message) : known.message;
    throw clientError(known.code, message, { sqlstate: known.sqlstate, ...(known.constraint ? { constraint: known.constraint } : {}) });
  }
}

interface RecordDepositInput {
  casinoId: string;
  mpTransferId: string;
  uname: string;
  experience: string;
  currencyKey: string;
  amount: number;
}

async function lockedJob(client: pg.ClientBase, requestId: string): Promise<{ id: string; status: string; casino_id: string }> {
  let rows: { id: string; status: string; casino_id: string; leased: boolean }[];
  const inProgress = () => clientError(ErrorCode.TRANSFER_IN_PROGRESS, `Withdrawal ${requestId} is being sent to the casino right now; try again in a moment.`);
  try {
    // A worker holds a lease while it talks to the casino, and the row's lock while it records the answer.
    ({ rows } = await client.query(
      "select id, status, casino_id, coalesce(locked_until > now(), false) as leased from hub.transfer_job where withdrawal_request_id = $1 for update nowait",
      [requestId],
    ));
  } catch (error) {
    if ((error as { code?: string }).code === "55P03") throw inProgress();
    throw error;
  }
  const job = rows[0];
  if (!job) throw clientError(ErrorCode.TRANSFER_NOT_FOUND, `No withdrawal request has the id ${requestId}.`);
  if (job.leased && job.status === "PENDING") throw inProgress();
  if (job.status !== "PENDING") throw clientError(ErrorCode.TRANSFER_NOT_PENDING, `Withdrawal ${requestId} is no longer pending (its worker item is ${job.status}): nothing to do.`);
  return job;
}

/** hubRecordTakeRequest: a casino's backend delivers a take request; received (reserved or rejected) once. */
function recordTakeRequestPlan($input: ExecutableStep, runtime: TransferRuntime, log: Logger) {
  return sideEffect([$input, context().get("identity"), context().get("superuserPool")], async ([raw, identity, pool]) => {
    const actor = operatorActor(identity);
    const input = raw as { casinoId: string; mpTakeRequestId: string; uname: string; experience: string; currencyKey: string; amount?: number | null };
    const casinoId = uuidArg("casinoId", input.casinoId);
    if (input.amount != null) wholeAmount("amount", input.amount);
    const result = await guarded(log, async () => {
      const take = checkTakeRequest({ id: input.mpTakeRequestId, uname: input.uname, experience: input.experience, currencyKey: input.currencyKey, amount: input.amount ?? null });
      const endpoint = await transferEndpoint(pool, casinoId);
      if (!endpoint.found) throw clientError(ErrorCode.UNKNOWN_CASINO, `No casino has the id ${casinoId}.`);
      // A reserve the hub could never transfer nor refund would be stuck: refuse before taking anything.
      if (!endpoint.reachable) {
        throw clientError(ErrorCode.TRANSFERS_NOT_CONFIGURED, `hubRecordTakeRequest: casino ${casinoId} has no transfer endpoint, so the hub could not transfer the take request; give it a base URL or a url with hubSetCasinoTransfers.`);
      }
      const { row, created } = await withPgPoolTransaction(pool, (client) => recordTakeRequest(client, casinoId, take, actor, runtime.options.takeRequestTimeoutMs));
      noteCommitted({ operation: "hubRecordTakeRequest", ids: { takeRequestId: row.id } });
      return { takeRequestId: row.id, created };
    });
    runtime.wake();
    return result;
  });
}
const TRANSFER_TYPE_DEFS = gql`
  input HubRecordDepositInput {
    casinoId: UUID!
    "The casino's id of the transfer: the hub credits each (casino, mpTransferId) once."
    mpTransferId: String!
    "The player's name at the casino (the player is created when new)."
    uname: String!
    "The experience's name (created when new)."
    experience: String!
    currencyKey: String!
    "Whole base units, from 1 to 9007199254740991."
    amount: Float!
  }
  type HubRecordDepositPayload {
    deposit: HubDeposit
    "false when this transfer was already recorded: nothing was credited this time."
    created: Boolean!
  }
  input HubWithdrawInput {
    currencyKey: String!
    "Whole base units, from 1 to 9007199254740991."
    amount: Float!
    "Optional, 1 to 255 characters: a retry with the same key and input answers the first withdrawal and debits nothing (kept 24 hours)."
    idempotencyKey: String
  }
  type HubWithdrawPayload {
    withdrawalRequest: HubWithdrawalRequest
    withdrawal: HubWithdrawal
  }
  input HubSetCasinoTransfersInput {
    casinoId: UUID!
    "Connector kind: http (built in) or one given in ServerOptions.transfers.connectors. Default http."
    connector: String
    "The casino's transfer URL; default <baseUrl>/hub/transfers."
    url: String
    "Fetch incoming transfers from the casino (default true); false: deposits arrive only by hubRecordDeposit."
    poll: Boolean
    "Fetch the casino's take requests (default false); they may also arrive by hubRecordTakeRequest."
    takeRequests: Boolean
  }
  input HubRecordTakeRequestInput {
    casinoId: UUID!
    "The casino's id of the take request: the hub acts on each once."
    mpTakeRequestId: UUID!
    "The player's name at the casino."
    uname: String!
    "The experience's name."
    experience: String!
    currencyKey: String!
    "Whole base units, from 1 to 9007199254740991; null: the player's whole balance."
    amount: Float
  }
  type HubRecordTakeRequestPayload {
    takeRequest: HubTakeRequest
    "false when this take request was already received: nothing was reserved this time."
    created: Boolean!
  }
  type HubSetCasinoTransfersPayload {
    casinoId: UUID!
  }
  input HubWithdrawalActionInput {
    withdrawalRequestId: UUID!
  }
  type HubTransferJobPayload {
    transferJob: HubTransferJob
  }
  type HubRefundWithdrawalPayload {
    withdrawal: HubWithdrawal
  }
  extend type Mutation {
    "Operators (a casino backend): credit a deposit the casino reports, once per (casinoId, mpTransferId)."
    hubRecordDeposit(input: HubRecordDepositInput!): HubRecordDepositPayload!
    "A player: move amount from the balance back to the casino; the hub sends it and retries until the casino answers."
    hubWithdraw(input: HubWithdrawInput!): HubWithdrawPayload!
    "Operators (a casino backend): the casino asks the hub to take a player's funds back; reserved (or rejected) once per mpTakeRequestId."
    hubRecordTakeRequest(input: HubRecordTakeRequestInput!): HubRecordTakeRequestPayload!
    "Operators: how the hub exchanges transfers with a casino."
    hubSetCasinoTransfers(input: HubSetCasinoTransfersInput!): HubSetCasinoTransfersPayload!
    "Operators: make a pending withdrawal due now instead of at its next attempt time."
    hubRetryWithdrawal(input: HubWithdrawalActionInput!): HubTransferJobPayload!
    "Operators: give a stuck withdrawal back to the balance, only when the casino says it never applied it (or refused it)."
    hubRefundWithdrawal(input: HubWithdrawalActionInput!): HubRefundWithdrawalPayload!
  }
`;

/** hubSetCasinoTransfers: how the hub exchanges transfers with a casino (connector, URL, polling, take requests). */
function setCasinoTransfersPlan($input: ExecutableStep, runtime: TransferRuntime, log: Logger) {
  return sideEffect([$input, context().get("identity"), context().get("superuserPool")], async ([raw, identity, pool]) => {
    operatorActor(identity);
    const input = raw as { casinoId: string; connector?: string | null; url?: string | null; poll?: boolean | null; takeRequests?: boolean | null };
    const casinoId = uuidArg("casinoId", input.casinoId);
    const connector = input.connector ?? "http";
    if (connector !== "http" && !runtime.options.connectors[connector]) {
      throw clientError(ErrorCode.BAD_USER_INPUT, `connector must be "http" or one of ServerOptions.transfers.connectors (${Object.keys(runtime.options.connectors).join(", ") || "none configured"}); received ${describeValue(connector)}.`);
    }
    if (input.url != null && "expected" in parse.httpUrl(input.url)) {
      throw clientError(ErrorCode.BAD_USER_INPUT, `url must be an http:// or https:// URL; received ${describeValue(input.url)}.`);
    }
    const poll = input.poll ?? true;
    const takeRequests = input.takeRequests ?? false;
    if (takeRequests && connector !== "http") {
      const probe = runtime.options.connectors[connector]!({ casinoId, url: input.url ?? null, apiKey: null, timeoutMs: runtime.options.requestTimeoutMs });
      if (!probe.fetchTakeRequests || !probe.transferTake || !probe.lookupTake || !probe.rejectTake) {
        throw clientError(ErrorCode.TAKE_REQUESTS_NOT_SUPPORTED, `takeRequests: true needs a connector with fetchTakeRequests, transferTake, lookupTake and rejectTake; the connector ${describeValue(connector)} lacks some of them.`);
      }
    }
    return guarded(log, () =>
      withPgPoolTransaction(pool, async (client) => {
        const { rows } = await client.query<{ base_url: string | null }>("select base_url from hub.casino where id = $1", [casinoId]);
        if (!rows[0]) throw clientError(ErrorCode.UNKNOWN_CASINO, `No casino has the id ${casinoId}.`);
        if (connector === "http" && input.url == null && rows[0].base_url === null) {
          throw clientError(ErrorCode.TRANSFERS_NOT_CONFIGURED, `Casino ${casinoId} has no base URL, so the http connector has nowhere to go: give url (its transfer endpoint).`);
        }
        await client.query(
          `insert into hub.casino_transfer_config (casino_id, connector, url, poll, take_requests) values ($1, $2, $3, $4, $5)
           on conflict (casino_id) do update set connector = excluded.connector, url = excluded.url, poll = excluded.poll, take_requests = excluded.take_requests, updated_at = now()`,
          [casinoId, connector, input.url ?? null, poll, takeRequests],
        );
        await client.query(
          takeRequests
            ? `insert into hub.transfer_job (kind, casino_id) values ('TAKE_POLL', $1)
               on conflict (casino_id) where kind = 'TAKE_POLL' do update set status = 'PENDING', next_attempt_at = now(), updated_at = now()`
            : "update hub.transfer_job set status = 'DONE', updated_at = now() where kind = 'TAKE_POLL' and casino_id = $1",
          [casinoId],
        );
        if (poll) {
          await client.query(
            `insert into hub.transfer_job (kind, casino_id) values ('POLL', $1)
             on conflict (casino_id) where kind = 'POLL' do update set status = 'PENDING', next_attempt_at = now(), updated_at = now()`,
            [casinoId],
          );
        } else {
          await client.query("update hub.transfer_job set status = 'DONE', updated_at = now() where kind = 'POLL' and casino_id = $1", [casinoId]);
        }
        runtime.wake();
        return { casinoId };
      }),
    );
  });
}

/** hubRefundWithdrawal: back to the balance only when the casino says it never applied the withdrawal (or refused it). */
function refundWithdrawalPlan($input: ExecutableStep, runtime: TransferRuntime, log: Logger) {
  return sideEffect([$input, context().get("identity"), context().get("superuserPool")], async ([raw, identity, pool]) => {
    const actor = operatorActor(identity);
    const requestId = uuidArg("withdrawalRequestId", (raw as { withdrawalRequestId: unknown }).withdrawalRequestId);
    return guarded(log, () =>
      withPgPoolTransaction(pool, async (client) => {
        // Holding the item's lock keeps every worker from sending it meanwhile.
        const job = await lockedJob(client, requestId);
        const { rows } = await client.query<{ open: boolean; expires_at: Date }>(
          "select expires_at + $2 * interval '1 millisecond' > now() as open, expires_at from hub_hidden.withdrawal_send_window where withdrawal_request_id = $1",
          [requestId, runtime.options.clockSkewMs],
        );
        if (rows[0]?.open) {
          // Sending stops until the window has closed, so that a refund asked again then can be decided.
          const { rows: paused } = await client.query<{ until: Date }>(
            `update hub.transfer_job set next_attempt_at = greatest(next_attempt_at, $2::timestamptz + $3 * interval '1 millisecond'), updated_at = now()
              where id = $1 returning next_attempt_at as until`,
            [job.id, rows[0].expires_at, runtime.options.clockSkewMs + 100],
          );
          return {
            refusal: `Withdrawal ${requestId} was not refunded: its last send may still reach the casino until ${rows[0].expires_at.toISOString()} (plus ${runtime.options.clockSkewMs} ms of allowed clock difference). Sending is paused until ${paused[0]!.until.toISOString()}: ask again after that.`,
          };
        }
        const connector = await connectorForCasino(client, job.casino_id, runtime.options);
        let found;
        try {
          found = await connector.lookup(requestId);
        } catch (error) {
          if (!(error instanceof OutcomeUnknownError)) throw error;
          throw clientError(ErrorCode.CASINO_UNREACHABLE, `Withdrawal ${requestId} was not refunded: the casino could not say whether it applied it (${error.message}).`);
        }
        const w = (await loadWithdrawal(client, requestId))!;
        if (found.status === "COMPLETED") {
          await completeWithdrawal(client, requestId, found.mpTransferId);
          // The completion is recorded (committed below) even though the refund is refused.
          return { refusal: `Withdrawal ${requestId} was not refunded: the casino applied it as its transfer ${found.mpTransferId}; it is now recorded as COMPLETED.` };
        }
        await refundWithdrawal(client, w, actor, found.status === "REFUSED" ? `the casino refused it: ${found.reason}` : "the casino never applied it (operator refund)");
        return { withdrawalId: requestId };
      }),
    ).then((result) => {
      if ("refusal" in result) throw clientError(ErrorCode.TRANSFER_REFUND_UNSAFE, result.refusal!);
      noteCommitted({ operation: "hubRefundWithdrawal", ids: { withdrawalRequestId: result.withdrawalId } });
      return result;
    });
  });
}

export const HubTransfersPlugin = extendSchema((build) => {
  // This server's options, workers and logger: the schema is built for one server.
  const { transfers: runtime, log } = serverOfBuild(build);
  const resources = build.input.pgRegistry.pgResources;
  const deposit = resources.hub_deposit;
  const withdrawalRequest = resources.hub_withdrawal_request;
  const withdrawal = resources.hub_withdrawal;
  const job = resources.hub_transfer_job;
  const takeRequest = resources.hub_take_request;
  if (!deposit || !withdrawalRequest || !withdrawal || !job || !takeRequest) {
    throw new Error("HubTransfersPlugin: the transfer tables are missing from the schema (is the `hub` schema migrated?)");
  }
  return {
    typeDefs: TRANSFER_TYPE_DEFS,
    objects: {
      Mutation: {
        plans: {
          hubRecordDeposit(_parent, fieldArgs) {
            const $result = sideEffect([fieldArgs.getRaw("input"), context().get("identity"), context().get("superuserPool")], async ([raw, identity, pool]) => {
              const actor = operatorActor(identity);
              const input = raw as RecordDepositInput;
              const casinoId = uuidArg("casinoId", input.casinoId);
              wholeAmount("amount", input.amount);
              return guarded(log, async () => {
                const transfer = checkIncoming({ id: input.mpTransferId, uname: input.uname, experience: input.experience, currencyKey: input.currencyKey, amount: input.amount });
                const { rows } = await pool.query("select 1 from hub.casino where id = $1", [casinoId]);
                if (!rows[0]) throw clientError(ErrorCode.UNKNOWN_CASINO, `No casino has the id ${casinoId}.`);
                const { deposit: row, created } = await withPgPoolTransaction(pool, (client) => recordDeposit(client, casinoId, transfer, actor));
                noteCommitted({ operation: "hubRecordDeposit", ids: { depositId: row.id } });
                return { depositId: row.id, created };
              });
            });
            return $result;
          },
          hubWithdraw(_parent, fieldArgs) {
            return sideEffect([fieldArgs.getRaw("input"), context().get("identity"), context().get("superuserPool")], async ([raw, identity, pool]) => {
              if (identity?.kind !== "user") {
                throw clientError(identity ? ErrorCode.FORBIDDEN : ErrorCode.UNAUTHENTICATED, "Unauthorized: hubWithdraw needs a player's session (Authorization: session:<key>).");
              }
              const input = raw as { currencyKey: string; amount: number; idempotencyKey?: string | null };
              const amount = wholeAmount("amount", input.amount);
              const { idempotencyKey, ...request } = input;
              const claim = { userId: identity.session.user_id, idempotencyKey: checkIdempotencyKey(idempotencyKey, "hubWithdraw"), operation: "hubWithdraw", request };
              const { user_id, casino_id, experience_id } = identity.session;
              const endpoint = await transferEndpoint(pool, casino_id);
              if (!endpoint.reachable) {
                throw clientError(ErrorCode.TRANSFERS_NOT_CONFIGURED, `hubWithdraw: this session's casino (${casino_id}) has no transfer endpoint, so a withdrawal could not be sent; its operator must give it a base URL or a url with hubSetCasinoTransfers.`);
              }
              const requestId = await guarded(log, () =>
                withPgPoolTransaction(pool, async (client) => {
                  // Claimed before the debit: a retry answers the first withdrawal even once the balance is spent.
                  const replay = await dbClaimIdempotencyKey(client, claim);
                  if (replay) return replay.resultId!;
                  const id = await requestWithdrawal(client, { userId: user_id, casinoId: casino_id, experienceId: experience_id, currencyKey: input.currencyKey, amount, actor: `user:${user_id}` });
                  await dbRecordIdempotentResult(client, { ...claim, resultId: id, result: { requestId: id } });
                  return id;
                }),
              );
              noteCommitted({ operation: "hubWithdraw", ids: { withdrawalRequestId: requestId }, idempotencyKey: claim.idempotencyKey });
              runtime.wake();
              return { requestId };
            });
          },
          hubRecordTakeRequest: (_parent, fieldArgs) => recordTakeRequestPlan(fieldArgs.getRaw("input"), runtime, log),
          hubSetCasinoTransfers: (_parent, fieldArgs) => setCasinoTransfersPlan(fieldArgs.getRaw("input"), runtime, log),
          hubRetryWithdrawal(_parent, fieldArgs) {
            const $result = sideEffect([fieldArgs.getRaw("input"), context().get("identity"), context().get("superuserPool")], async ([raw, identity, pool]) => {
              operatorActor(identity);
              const requestId = uuidArg("withdrawalRequestId", (raw as { withdrawalRequestId: unknown }).withdrawalRequestId);
              const jobId = await guarded(log, () =>
                withPgPoolTransaction(pool, async (client) => {
                  const job = await lockedJob(client, requestId);
                  await client.query("update hub.transfer_job set next_attempt_at = now(), updated_at = now() where id = $1", [job.id]);
                  return job.id;
                }),
              );
              runtime.wake();
              return { jobId };
            });
            return $result;
          },
          hubRefundWithdrawal: (_parent, fieldArgs) => refundWithdrawalPlan(fieldArgs.getRaw("input"), runtime, log),
        },
      },
      HubRecordDepositPayload: {
        plans: {
          deposit: ($result: any) => deposit.get({ id: access($result, "depositId") }),
          created: ($result: any) => access($result, "created"),
        },
      },
      HubRecordTakeRequestPayload: {
        plans: {
          takeRequest: ($result: any) => takeRequest.get({ id: access($result, "takeRequestId") }),
          created: ($result: any) => access($result, "created"),
        },
      },
      HubWithdrawPayload: {
        plans: {
          withdrawalRequest: ($result: any) => withdrawalRequest.get({ id: access($result, "requestId") }),
          withdrawal: ($result: any) => withdrawal.get({ withdrawal_request_id: access($result, "requestId") }),
        },
      },
      HubTransferJobPayload: {
        plans: {
          transferJob: ($result: any) => job.get({ id: access($result, "jobId") }),
        },
      },
      HubRefundWithdrawalPayload: {
        plans: {
          withdrawal: ($result: any) => withdrawal.get({ withdrawal_request_id: access($result, "withdrawalId") }),
        },
      },
    },
  };
}, "HubTransfersPlugin");
