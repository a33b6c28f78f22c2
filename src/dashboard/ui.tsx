import { useCallback, useEffect, useState, type ReactNode } from "react";

/** A read that reruns when its dependencies change; `reload` reruns it on demand. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): { data?: T; error?: string; loading: boolean; reload: () => void } {
  const [state, setState] = useState<{ data?: T; error?: string; loading: boolean }>({ loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let current = true;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => current && setState({ data, loading: false }),
      (error: unknown) => current && setState({ error: (error as Error).message, loading: false }),
    );
    return () => {
      current = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}

export function ErrorBox({ error }: { error?: string | undefined }) {
  if (!error) return null;
  return (
    <p className="error" role="alert">
      {error}
    </p>
  );
}

export function NotAvailable({ what, needs }: { what: string; needs: string[] }) {
  return (
    <div className="unavailable" data-testid="not-available">
      <strong>{what}: not available on this hub.</strong>
      <p>This hub's GraphQL schema lacks {needs.join(", ")}: this part of the page works once the hub has it (after an upgrade, sign in again).</p>
    </div>
  );
}

export function Loading({ when }: { when: boolean }) {
  return when ? <p className="muted">Loading…</p> : null;
}

const number = new Intl.NumberFormat("en-US", { maximumFractionDigits: 6 });
export const fmt = (n: number | null | undefined) => (n === null || n === undefined ? "–" : number.format(n));
/** A change of an amount: with its sign, + included. */
export const fmtDelta = (n: number | null | undefined) => (n === null || n === undefined ? "–" : `${n > 0 ? "+" : ""}${number.format(n)}`);
export const fmtTime = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString("en-GB", { hour12: false }) : "–");
export const short = (id: string | null | undefined) => (id ? id.slice(-8) : "–");

/** A value of unknown shape shown as text: objects as JSON, never as markup. */
export function text(value: unknown): string {
  if (value === null || value === undefined) return "–";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

export function Section({ title, children, actions }: { title: string; children: ReactNode; actions?: ReactNode }) {
  return (
    <section className="card">
      <header className="card-head">
        <h2>{title}</h2>
        {actions}
      </header>
      {children}
    </section>
  );
}

/** A button whose action runs only after a second, explicit confirmation in the page. */
export function ConfirmButton({ label, question, onConfirm, danger = true }: { label: string; question: string; onConfirm: () => Promise<unknown>; danger?: boolean }) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();
  if (!asking) {
    return (
      <span>
        <button className={danger ? "danger" : ""} onClick={() => setAsking(true)}>
          {label}
        </button>
        <ErrorBox error={error} />
      </span>
    );
  }
  return (
    <span className="confirm" role="group" aria-label={question}>
      <span>{question}</span>
      <button
        className="danger"
        disabled={busy}
        onClick={async () => {
          setBusy(true);
          setError(undefined);
          try {
            await onConfirm();
          } catch (e) {
            setError((e as Error).message);
          } finally {
            setBusy(false);
            setAsking(false);
          }
        }}
      >
        Yes, {label.toLowerCase()}
      </button>
      <button onClick={() => setAsking(false)}>Cancel</button>
    </span>
  );
}

/** A table that scrolls sideways on a narrow screen instead of overflowing the page. */
export function Table({ head, rows, empty = "Nothing yet.", testId }: { head: ReactNode[]; rows: ReactNode[][]; empty?: string; testId?: string }) {
  if (rows.length === 0) return <p className="muted">{empty}</p>;
  return (
    <div className="table-wrap">
      <table data-testid={testId}>
        <thead>
          <tr>
            {head.map((h, i) => (
              <th key={i}>{h}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row, i) => (
            <tr key={i}>
              {row.map((cell, j) => (
                <td key={j}>{cell}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
