import { betSources, gql, uuidTime, type BetSource } from "../api.js";
import { BarChart, LineChart, type Point } from "../charts.js";
import { useCaps } from "../context.js";
import { ErrorBox, fmt, Loading, NotAvailable, Section, useLoad } from "../ui.js";

const HOURS = 24;
/** Most bets read per bet table for the wagered-per-hour chart (newest first). */
const WAGER_READ_LIMIT = 5000;

interface Bankroll {
  id: string;
  casinoId: string;
  currencyKey: string;
  amount: number;
  bets: string;
  wagered: number;
  expectedValue: number;
  hubCasinoByCasinoId: { name: string } | null;
}
interface Hour {
  hour: string;
  bets: string;
  houseProfit: number;
  realisedProfit: number;
  bankroll: number | null;
}

/**
 * Wagered per hour: the hub has no per-hour wager column, so the page reads
 * the bets themselves (every table implementing Bet, newest first, by pages)
 * for the last HOURS hours and adds them up by the time in their UUIDv7 ids.
 */
async function wageredPerHour(sources: BetSource[], casinoId: string, currencyKey: string, since: number): Promise<{ byHour: Map<number, number>; truncated: boolean }> {
  const byHour = new Map<number, number>();
  let truncated = false;
  for (const source of sources) {
    let after: string | null = null;
    let read = 0;
    for (;;) {
      const data: any = await gql(
        `query HubDashboardWagers($casinoId: UUID!, $currencyKey: String!, $after: Cursor) {
          list: ${source.listField}(condition: { casinoId: $casinoId, currencyKey: $currencyKey }, orderBy: PRIMARY_KEY_DESC, first: 500, after: $after) {
            nodes { id wager } pageInfo { hasNextPage endCursor } } }`,
        { casinoId, currencyKey, after },
      );
      let older = false;
      for (const bet of data.list.nodes as { id: string; wager: number }[]) {
        const t = uuidTime(bet.id);
        if (t < since) {
          older = true;
          break;
        }
        const hour = Math.floor(t / 3_600_000) * 3_600_000;
        byHour.set(hour, (byHour.get(hour) ?? 0) + bet.wager);
      }
      read += data.list.nodes.length;
      if (older || !data.list.pageInfo.hasNextPage) break;
      if (read >= WAGER_READ_LIMIT) {
        truncated = true;
        break;
      }
      after = data.list.pageInfo.endCursor;
    }
  }
  return { byHour, truncated };
}

function BankrollCard({ bankroll, hourly, sources }: { bankroll: Bankroll; hourly: boolean; sources: BetSource[] }) {
  const history = useLoad(async () => {
    if (!hourly) return undefined;
    const data = await gql<{ hubBankrollHourly: { nodes: Hour[] } }>(
      `query HubDashboardHourly($casinoId: UUID!, $currencyKey: String!, $hours: Int!) {
        hubBankrollHourly(casinoId: $casinoId, currencyKey: $currencyKey, hours: $hours) { nodes { hour bets houseProfit realisedProfit bankroll } } }`,
      { casinoId: bankroll.casinoId, currencyKey: bankroll.currencyKey, hours: HOURS },
    );
    const hours = data.hubBankrollHourly.nodes;
    const since = hours.length ? Date.parse(hours[0]!.hour) : Date.now() - HOURS * 3_600_000;
    const wagers = await wageredPerHour(sources, bankroll.casinoId, bankroll.currencyKey, since);
    return { hours, wagers };
  }, [bankroll.id, hourly]);
  const hours = history.data?.hours ?? [];
  const pts = (f: (h: Hour) => number | null): Point[] => hours.map((h) => ({ t: Date.parse(h.hour), v: f(h) ?? 0 }));
  const realised = hours.length ? hours[hours.length - 1]!.realisedProfit : undefined;
  const edge = Number(bankroll.wagered) > 0 ? (n: number) => `${((n / bankroll.wagered) * 100).toFixed(2)} % of wagered` : () => "";
  return (
    <Section title={`${bankroll.hubCasinoByCasinoId?.name ?? bankroll.casinoId} · ${bankroll.currencyKey}`}>
      <dl className="stats">
        <div>
          <dt>Bankroll</dt>
          <dd>{fmt(bankroll.amount)}</dd>
        </div>
        <div>
          <dt>Bets</dt>
          <dd>{fmt(Number(bankroll.bets))}</dd>
        </div>
        <div>
          <dt>Wagered</dt>
          <dd>{fmt(bankroll.wagered)}</dd>
        </div>
        <div>
          <dt>Expected house profit</dt>
          <dd>
            {fmt(bankroll.expectedValue)} <small>{edge(bankroll.expectedValue)}</small>
          </dd>
        </div>
        <div>
          <dt>Realised house profit</dt>
          <dd>
            {fmt(realised)} {realised !== undefined && <small>{edge(realised)}</small>}
          </dd>
        </div>
      </dl>
      {!hourly ? (
        <NotAvailable what="Hourly charts" needs={["hubBankrollHourly"]} />
      ) : (
        <>
          <Loading when={history.loading} />
          <ErrorBox error={history.error} />
          {history.data && (
            <div className="charts">
              <LineChart
                title={`Bankroll, last ${HOURS} h`}
                points={pts((h) => h.bankroll).filter((_, i) => hours[i]!.bankroll !== null)}
                withZero={false}
                domain={hours.length ? [Date.parse(hours[0]!.hour), Date.parse(hours[hours.length - 1]!.hour)] : undefined}
              />
              <BarChart title="Bets per hour" points={pts((h) => Number(h.bets))} />
              <BarChart
                title={`Wagered per hour${history.data.wagers.truncated ? " (newest bets only)" : ""}`}
                points={hours.map((h) => ({ t: Date.parse(h.hour), v: history.data!.wagers.byHour.get(Date.parse(h.hour)) ?? 0 }))}
              />
              <LineChart title="Realised house profit (to date) vs expected" points={pts((h) => h.realisedProfit)} reference={bankroll.expectedValue} referenceLabel="expected" />
            </div>
          )}
        </>
      )}
    </Section>
  );
}

export function Overview() {
  const caps = useCaps();
  const hasBankrolls = caps.query.has("allHubBankrolls");
  const hourly = caps.query.has("hubBankrollHourly");
  const sources = betSources(caps);
  const bankrolls = useLoad(async () => {
    if (!hasBankrolls) return [];
    const data = await gql<{ allHubBankrolls: { nodes: Bankroll[] } }>(
      `query HubDashboardBankrolls { allHubBankrolls(orderBy: [CASINO_ID_ASC, CURRENCY_KEY_ASC]) { nodes { id casinoId currencyKey amount bets wagered expectedValue hubCasinoByCasinoId { name } } } }`,
    );
    return data.allHubBankrolls.nodes;
  }, []);
  if (!hasBankrolls) return <NotAvailable what="Overview" needs={["allHubBankrolls"]} />;
  return (
    <div className="stack">
      <h1>Overview</h1>
      <p className="muted">
        Per casino and currency: the house bankroll now and over the last {HOURS} hours (from the ledger), bets and amounts wagered per hour, and the house's realised
        profit against the expected profit the bankroll tracks.
      </p>
      <Loading when={bankrolls.loading && !bankrolls.data} />
      <ErrorBox error={bankrolls.error} />
      {bankrolls.data?.length === 0 && <p className="muted">No bankroll yet: credit one with hubCreditBankroll.</p>}
      {bankrolls.data?.map((b) => <BankrollCard key={b.id} bankroll={b} hourly={hourly} sources={sources} />)}
    </div>
  );
}
