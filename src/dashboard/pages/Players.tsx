import { useState, type FormEvent } from "react";
import { gql } from "../api.js";
import { useCaps } from "../context.js";
import { ConfirmButton, ErrorBox, fmt, fmtDelta, fmtTime, Loading, NotAvailable, Section, short, Table, useLoad } from "../ui.js";
import { betRowCells, BET_HEAD, readBets } from "./BetList.js";

const PAGE = 20;

function Search() {
  const caps = useCaps();
  const [text, setText] = useState("");
  const [wanted, setWanted] = useState<string | null>(null);
  const bySearch = caps.query.has("hubUserSearch");
  const found = useLoad(async () => {
    if (wanted === null) return undefined;
    const query = bySearch
      ? `query HubDashboardUserSearch($text: String!) { list: hubUserSearch(nameContains: $text, first: 50) { nodes { id uname createdAt hubCasinoByCasinoId { name } } } }`
      : `query HubDashboardUsers($text: String!) { list: allHubUsers(condition: { uname: $text }, first: 50) { nodes { id uname createdAt hubCasinoByCasinoId { name } } } }`;
    const data = await gql<{ list: { nodes: any[] } }>(query, { text: wanted });
    return data.list.nodes;
  }, [wanted]);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setWanted(text.trim());
  };
  return (
    <Section title="Find a player">
      <form onSubmit={submit} className="row">
        <input aria-label="Player name" placeholder={bySearch ? "Part of the name" : "The exact name"} value={text} onChange={(e) => setText(e.target.value)} />
        <button type="submit">Search</button>
      </form>
      <Loading when={found.loading && wanted !== null} />
      <ErrorBox error={found.error} />
      {found.data && (
        <Table
          testId="players"
          head={["Name", "Casino", "Since"]}
          empty="No player has that name."
          rows={found.data.map((u) => [<a href={`#/players/${u.id}`}>{u.uname}</a>, u.hubCasinoByCasinoId?.name ?? "–", fmtTime(u.createdAt)])}
        />
      )}
    </Section>
  );
}

function Ledger({ userId }: { userId: string }) {
  // Cursors of the pages seen, so Newer goes back exactly.
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const after = cursors[cursors.length - 1] ?? null;
  const page = useLoad(async () => {
    const data = await gql<{ hubUserById: { hubLedgersByUserId: { nodes: any[]; pageInfo: { hasNextPage: boolean; endCursor: string | null }; totalCount: number } } }>(
      `query HubDashboardLedger($id: UUID!, $after: Cursor, $first: Int!) { hubUserById(id: $id) {
        hubLedgersByUserId(orderBy: PRIMARY_KEY_DESC, first: $first, after: $after) { totalCount nodes { id createdAt currencyKey amountDelta balanceAfter actor reason betId } pageInfo { hasNextPage endCursor } } } }`,
      { id: userId, after, first: PAGE },
    );
    return data.hubUserById?.hubLedgersByUserId;
  }, [userId, after]);
  return (
    <Section
      title={`Ledger${page.data ? ` (${page.data.totalCount} entries)` : ""}`}
      actions={
        <span className="row">
          <button disabled={cursors.length < 2} onClick={() => setCursors((c) => c.slice(0, -1))}>
            ← Newer
          </button>
          <button disabled={!page.data?.pageInfo.hasNextPage} onClick={() => setCursors((c) => [...c, page.data!.pageInfo.endCursor])}>
            Older →
          </button>
        </span>
      }
    >
      <ErrorBox error={page.error} />
      <Table
        testId="ledger"
        head={["Time", "Change", "After", "Why", "By"]}
        rows={(page.data?.nodes ?? []).map((l) => [
          fmtTime(l.createdAt),
          <span className={l.amountDelta > 0 ? "pos" : "neg"}>{`${fmtDelta(l.amountDelta)} ${l.currencyKey}`}</span>,
          fmt(l.balanceAfter),
          l.reason,
          l.actor,
        ])}
      />
    </Section>
  );
}

function Player({ userId }: { userId: string }) {
  const caps = useCaps();
  const canRevoke = caps.mutation.has("hubRevokeSession");
  const player = useLoad(async () => {
    const data = await gql<{ hubUserById: any }>(
      `query HubDashboardPlayer($id: UUID!) { hubUserById(id: $id) { id uname createdAt casinoId hubCasinoByCasinoId { name }
        hubBalancesByUserId(first: 100) { nodes { id currencyKey amount hubExperienceByExperienceId { name } } }
        hubSessionsByUserId(orderBy: PRIMARY_KEY_DESC, first: 50) { nodes { id createdAt expiredAt revokedAt hubExperienceByExperienceId { name } } } } }`,
      { id: userId },
    );
    return data.hubUserById;
  }, [userId]);
  const bets = useLoad(() => readBets(caps, { userId, first: 20 }), [userId]);
  if (player.loading && !player.data) return <Loading when />;
  if (player.error) return <ErrorBox error={player.error} />;
  const u = player.data;
  if (!u) return <p className="error">No player has the id {userId}.</p>;
  const now = Date.now();
  return (
    <div className="stack">
      <p>
        <a href="#/players">← Players</a>
      </p>
      <h1 data-testid="player-name">{u.uname}</h1>
      <p className="muted">
        {u.hubCasinoByCasinoId?.name} · player since {fmtTime(u.createdAt)} · id <code>{u.id}</code>
      </p>
      <Section title="Balances">
        <Table head={["Experience", "Currency", "Amount"]} rows={u.hubBalancesByUserId.nodes.map((b: any) => [b.hubExperienceByExperienceId?.name ?? "–", b.currencyKey, fmt(b.amount)])} />
      </Section>
      <Section title="Sessions">
        <Table
          testId="sessions"
          head={["Started", "Experience", "State", ""]}
          rows={u.hubSessionsByUserId.nodes.map((s: any) => {
            const state = s.revokedAt ? `revoked ${fmtTime(s.revokedAt)}` : Date.parse(s.expiredAt) < now ? `expired ${fmtTime(s.expiredAt)}` : `active until ${fmtTime(s.expiredAt)}`;
            const active = !s.revokedAt && Date.parse(s.expiredAt) >= now;
            return [
              <span title={s.id}>{fmtTime(s.createdAt)}</span>,
              s.hubExperienceByExperienceId?.name ?? "–",
              state,
              active && canRevoke ? (
                <ConfirmButton
                  label="Revoke"
                  question={`Revoke session …${short(s.id)}? The player's next request with it is refused.`}
                  onConfirm={async () => {
                    await gql(`mutation HubDashboardRevokeSession($id: UUID!) { hubRevokeSession(input: { sessionId: $id }) { id revokedAt } }`, { id: s.id });
                    player.reload();
                  }}
                />
              ) : (
                ""
              ),
            ];
          })}
        />
        {!canRevoke && <p className="muted">Revoking sessions is not available on this hub (no hubRevokeSession).</p>}
      </Section>
      <Ledger userId={userId} />
      <Section title="Recent bets">
        <ErrorBox error={bets.error} />
        <Table head={BET_HEAD} rows={(bets.data ?? []).map(betRowCells)} empty="No bets." />
      </Section>
    </div>
  );
}

export function Players({ userId }: { userId?: string | undefined }) {
  const caps = useCaps();
  if (!caps.query.has("hubUserById")) return <NotAvailable what="Players" needs={["hubUserById"]} />;
  return userId ? (
    <Player key={userId} userId={userId} />
  ) : (
    <div className="stack">
      <h1>Players</h1>
      <Search />
    </div>
  );
}
