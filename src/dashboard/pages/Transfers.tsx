import { gql, scalarFields, type FieldInfo } from "../api.js";
import { useCaps } from "../context.js";
import { ConfirmButton, ErrorBox, fmtTime, Loading, NotAvailable, Section, short, text, useLoad } from "../ui.js";

/** A withdrawal still pending after this long, or whose last attempt failed, is shown as stuck. */
const STUCK_AFTER_MS = 5 * 60_000;

function cell(field: FieldInfo, value: unknown) {
  if (field.type === "Datetime" && typeof value === "string") return fmtTime(value);
  // Ids: the end of the UUID (the random part), the whole of it on hover.
  if (field.type === "UUID" && typeof value === "string") return <code title={value}>{short(value)}</code>;
  return text(value);
}

/** Every scalar column the hub exposes on the type: this page shows what exists. */
/** Columns taken from elsewhere than the row itself (the withdrawal's job in the transfer worker). */
interface Extra {
  name: string;
  render: (row: any) => React.ReactNode;
}

function GenericList({ title, listField, type, rowClass, actions, extra = [], onReload, filter = "" }: { title: string; listField: string; type: string; rowClass?: (row: any) => string; actions?: (row: any, reload: () => void) => React.ReactNode; extra?: Extra[]; onReload?: () => void; filter?: string }) {
  const caps = useCaps();
  const fields = scalarFields(caps, type);
  const withUser = caps.types.get(type)?.fields.has("hubUserByUserId");
  const list = useLoad(async () => {
    const data = await gql<{ list: { nodes: any[]; totalCount: number } }>(
      `query HubDashboardTransfers { list: ${listField}(orderBy: PRIMARY_KEY_DESC, first: 100${filter}) { totalCount nodes { ${fields.map((f) => f.name).join(" ")} ${withUser ? "hubUserByUserId { uname }" : ""} } } }`,
    );
    return data.list;
  }, [listField]);
  const reload = () => {
    list.reload();
    onReload?.();
  };
  const shown = fields.filter((f) => !["casinoId", "experienceId", ...(withUser ? ["userId"] : [])].includes(f.name));
  return (
    <Section title={`${title}${list.data ? ` (${list.data.totalCount})` : ""}`} actions={<button onClick={reload}>Refresh</button>}>
      <Loading when={list.loading && !list.data} />
      <ErrorBox error={list.error} />
      {list.data && list.data.nodes.length === 0 && <p className="muted">None.</p>}
      {list.data && list.data.nodes.length > 0 && (
        <div className="table-wrap">
          <table data-testid={listField}>
            <thead>
              <tr>
                {withUser && <th>Player</th>}
                {actions && <th />}
                {extra.map((e) => (
                  <th key={e.name}>{e.name}</th>
                ))}
                {shown.map((f) => (
                  <th key={f.name}>{f.name}</th>
                ))}
              </tr>
            </thead>
            <tbody>
              {list.data.nodes.map((row) => (
                <tr key={row.id} className={rowClass?.(row) ?? ""}>
                  {withUser && <td>{row.userId ? <a href={`#/players/${row.userId}`}>{row.hubUserByUserId?.uname ?? row.userId}</a> : "–"}</td>}
                  {actions && <td>{actions(row, reload)}</td>}
                  {extra.map((e) => (
                    <td key={e.name}>{e.render(row)}</td>
                  ))}
                  {shown.map((f) => (
                    <td key={f.name}>{cell(f, row[f.name])}</td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Section>
  );
}

export function Transfers() {
  const caps = useCaps();
  const has = (f: string) => caps.query.has(f);
  if (!has("allHubDeposits") && !has("allHubWithdrawalRequests") && !has("allHubWithdrawals")) {
    return (
      <div className="stack">
        <h1>Transfers</h1>
        <NotAvailable what="Transfers" needs={["allHubDeposits", "allHubWithdrawalRequests", "allHubWithdrawals"]} />
      </div>
    );
  }
  const retry = caps.mutation.has("hubRetryWithdrawal");
  const refund = caps.mutation.has("hubRefundWithdrawal");
  // A withdrawal's attempts and last error live on its item in the transfer worker's queue.
  const hasJobs = has("allHubTransferJobs");
  const jobs = useLoad(async () => {
    if (!hasJobs) return new Map<string, any>();
    const data = await gql<{ jobs: { nodes: any[] } }>(
      `query HubDashboardWithdrawalJobs { jobs: allHubTransferJobs(condition: { kind: "WITHDRAWAL" }, orderBy: PRIMARY_KEY_DESC, first: 500) { nodes { withdrawalRequestId status attempts lastError nextAttemptAt } } }`,
    );
    return new Map(data.jobs.nodes.map((j) => [j.withdrawalRequestId as string, j]));
  }, [hasJobs]);
  const jobOf = (row: any) => jobs.data?.get(row.withdrawalRequestId);
  // A take request's item: its transfer (or rejection) to the casino.
  const hasTakes = has("allHubTakeRequests");
  const takeJobs = useLoad(async () => {
    if (!hasJobs || !hasTakes) return new Map<string, any>();
    const data = await gql<{ jobs: { nodes: any[] } }>(
      `query HubDashboardTakeJobs { jobs: allHubTransferJobs(condition: { kind: "TAKE" }, orderBy: PRIMARY_KEY_DESC, first: 500) { nodes { takeRequestId status attempts lastError nextAttemptAt } } }`,
    );
    return new Map(data.jobs.nodes.map((j) => [j.takeRequestId as string, j]));
  }, [hasJobs, hasTakes]);
  const takeJobOf = (row: any) => takeJobs.data?.get(row.id);
  const takeStuck = (row: any) => {
    const open = row.status === "PROCESSING" || row.status === "PENDING" || (row.status === "REJECTED" && row.mpStatus === "PENDING");
    const old = row.statusChangedAt && Date.now() - Date.parse(row.statusChangedAt) > STUCK_AFTER_MS;
    return open && (old || takeJobOf(row)?.lastError) ? "stuck" : "";
  };
  const takeExtra: Extra[] = hasJobs
    ? [
        { name: "attempts", render: (row) => text(takeJobOf(row)?.attempts ?? "–") },
        { name: "lastError", render: (row) => <span className="last-error">{text(takeJobOf(row)?.lastError ?? "")}</span> },
        { name: "nextAttemptAt", render: (row) => (takeJobOf(row)?.status === "PENDING" ? fmtTime(takeJobOf(row).nextAttemptAt) : "–") },
      ]
    : [];
  const stuck = (row: any) => {
    const pending = typeof row.status === "string" && !/^(COMPLETED|DONE|SUCCEEDED|REFUNDED|CANCELED|CANCELLED)$/i.test(row.status);
    const old = row.statusAt && Date.now() - Date.parse(row.statusAt) > STUCK_AFTER_MS;
    const job = jobOf(row);
    return pending && (old || job?.lastError || job?.status === "FAILED") ? "stuck" : "";
  };
  const extra: Extra[] = hasJobs
    ? [
        { name: "attempts", render: (row) => text(jobOf(row)?.attempts ?? "–") },
        { name: "lastError", render: (row) => <span className="last-error">{text(jobOf(row)?.lastError ?? "")}</span> },
        { name: "nextAttemptAt", render: (row) => (jobOf(row)?.status === "PENDING" ? fmtTime(jobOf(row).nextAttemptAt) : "–") },
      ]
    : [];
  const act = (name: "hubRetryWithdrawal" | "hubRefundWithdrawal", label: string, question: string) => (row: any, reload: () => void) => (
    <ConfirmButton
      key={name}
      label={label}
      question={question}
      danger={name === "hubRefundWithdrawal"}
      onConfirm={async () => {
        try {
          await gql(`mutation HubDashboardTransferAction($id: UUID!) { ${name}(input: { withdrawalRequestId: $id }) { __typename } }`, { id: row.withdrawalRequestId });
        } finally {
          reload();
        }
      }}
    />
  );
  return (
    <div className="stack">
      <h1>Transfers</h1>
      <p className="muted">Rows highlighted are stuck: not finished {STUCK_AFTER_MS / 60_000} minutes after their last change, or their last attempt failed.</p>
      {has("allHubWithdrawals") ? (
        <GenericList
          title="Withdrawals"
          listField="allHubWithdrawals"
          type="HubWithdrawal"
          rowClass={stuck}
          extra={extra}
          onReload={jobs.reload}
          actions={
            retry || refund
              ? (row, reload) =>
                  stuck(row) || row.status === "FAILED" ? (
                    <span className="row">
                      {retry && act("hubRetryWithdrawal", "Retry now", "Send this withdrawal to the casino again now?")(row, reload)}
                      {refund && act("hubRefundWithdrawal", "Refund", "Give the amount back to the player's balance and stop trying?")(row, reload)}
                    </span>
                  ) : null
              : undefined
          }
        />
      ) : (
        <NotAvailable what="Withdrawals" needs={["allHubWithdrawals"]} />
      )}
      {hasTakes && (
        <GenericList title="Take requests" listField="allHubTakeRequests" type="HubTakeRequest" rowClass={takeStuck} extra={takeExtra} onReload={takeJobs.reload} />
      )}
      {hasJobs && (
        <GenericList
          title="Failed transfer items"
          listField="allHubTransferJobs"
          type="HubTransferJob"
          filter={`, condition: { status: "FAILED" }`}
        />
      )}
      {has("allHubWithdrawalRequests") ? <GenericList title="Withdrawal requests" listField="allHubWithdrawalRequests" type="HubWithdrawalRequest" /> : <NotAvailable what="Withdrawal requests" needs={["allHubWithdrawalRequests"]} />}
      {has("allHubDeposits") ? <GenericList title="Deposits" listField="allHubDeposits" type="HubDeposit" /> : <NotAvailable what="Deposits" needs={["allHubDeposits"]} />}
      {!(retry && refund) && <p className="muted">Retry and refund need hubRetryWithdrawal and hubRefundWithdrawal, which this hub does not have.</p>}
    </div>
  );
}
