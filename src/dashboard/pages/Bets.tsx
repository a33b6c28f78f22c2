import { useEffect, useRef, useState, type FormEvent } from "react";
import { betSources, gql, liveClient, scalarFields, type Capabilities } from "../api.js";
import { useCaps } from "../context.js";
import { digestBytes, fromPreimage, hexOf, MAX_PREIMAGE_WALK, verifyBet, type Verification } from "../fair.js";
import { ErrorBox, fmtDelta, fmtTime, Loading, NotAvailable, Section, short, Table, text, useLoad } from "../ui.js";
import { betRowCells, BET_HEAD, readBets } from "./BetList.js";

interface Alert {
  betId: string;
  userId: string;
  casinoId: string;
  experienceId: string;
  currencyKey: string;
  amountDelta: number;
  reason: string;
  createdAt: string;
}
const LIVE_ROWS = 100;

/** Resolve a player filter typed as a name: the exact name if one matches, else the only match. */
async function findPlayer(caps: Capabilities, name: string): Promise<{ id: string; uname: string }> {
  const query = caps.query.has("hubUserSearch")
    ? `query HubDashboardFindPlayer($text: String!) { list: hubUserSearch(nameContains: $text, first: 20) { nodes { id uname } } }`
    : `query HubDashboardFindPlayer($text: String!) { list: allHubUsers(condition: { uname: $text }, first: 20) { nodes { id uname } } }`;
  const data = await gql<{ list: { nodes: { id: string; uname: string }[] } }>(query, { text: name });
  const nodes = data.list.nodes;
  const exact = nodes.filter((n) => n.uname.toLowerCase() === name.toLowerCase());
  if (exact.length === 1) return exact[0]!;
  if (nodes.length === 1) return nodes[0]!;
  throw new Error(nodes.length === 0 ? `No player's name contains "${name}".` : `${nodes.length} players match "${name}": type more of the name.`);
}

/** Alerts carry ids only: the players' names are looked up once each. */
function usePlayerNames() {
  const [names, setNames] = useState<Record<string, string>>({});
  const asked = useRef(new Set<string>());
  const want = (userId: string) => {
    if (asked.current.has(userId)) return;
    asked.current.add(userId);
    gql<{ hubUserById: { uname: string } | null }>(`query HubDashboardPlayerName($id: UUID!) { hubUserById(id: $id) { uname } }`, { id: userId }).then(
      (data) => data.hubUserById && setNames((n) => ({ ...n, [userId]: data.hubUserById!.uname })),
      () => asked.current.delete(userId),
    );
  };
  return { names, want };
}

function LiveFeed({ userId, onAlert }: { userId: string | undefined; onAlert: () => void }) {
  const [alerts, setAlerts] = useState<Alert[]>([]);
  const { names, want } = usePlayerNames();
  const onAlertRef = useRef(onAlert);
  onAlertRef.current = onAlert;
  const [state, setState] = useState<"connecting" | "live" | "closed">("connecting");
  const [error, setError] = useState<string>();
  useEffect(() => {
    setState("connecting");
    setError(undefined);
    const client = liveClient();
    const offConnected = client.on("connected", () => setState("live"));
    const offClosed = client.on("closed", () => setState("closed"));
    const unsubscribe = client.subscribe<{ hubBetAlert: Alert }>(
      {
        query: `subscription HubDashboardLive($userId: UUID) { hubBetAlert(userId: $userId) { betId userId casinoId experienceId currencyKey amountDelta reason createdAt } }`,
        variables: { userId: userId ?? null },
      },
      {
        next: (message) => {
          if (message.errors?.length) setError(message.errors.map((e) => e.message).join("\n"));
          const alert = message.data?.hubBetAlert;
          if (alert) {
            want(alert.userId);
            setAlerts((list) => [alert, ...list].slice(0, LIVE_ROWS));
            onAlertRef.current();
          }
        },
        error: (e) => {
          setState("closed");
          setError(Array.isArray(e) ? e.map((x: Error) => x.message).join("\n") : e instanceof Error ? e.message : "The live connection closed.");
        },
        complete: () => undefined,
      },
    );
    return () => {
      unsubscribe();
      offConnected();
      offClosed();
    };
  }, [userId]);
  return (
    <Section title="Live" actions={<span className={`badge ${state}`}>{state === "live" ? "● live" : state}</span>}>
      <ErrorBox error={error} />
      <Table
        testId="live-feed"
        head={["Time", "Player", "Player's change", "Reason", "Bet"]}
        empty="Waiting for bets…"
        rows={alerts.map((a) => [
          fmtTime(a.createdAt),
          <a href={`#/players/${a.userId}`}>{names[a.userId] ?? short(a.userId)}</a>,
          <span className={a.amountDelta > 0 ? "pos" : "neg"}>{`${fmtDelta(a.amountDelta)} ${a.currencyKey}`}</span>,
          a.reason,
          <span data-bet-id={a.betId}>{short(a.betId)}</span>,
        ])}
      />
    </Section>
  );
}

function Feed() {
  const caps = useCaps();
  const sources = betSources(caps);
  const kinds = sources.map((s) => s.type);
  const [type, setType] = useState("");
  const [playerText, setPlayerText] = useState("");
  const [player, setPlayer] = useState<{ id: string; uname: string }>();
  const [filterError, setFilterError] = useState<string>();
  const [kind, setKind] = useState("");
  const [kindText, setKindText] = useState("");
  const withKinds = sources.some((s) => s.fields.has("kind"));
  const bets = useLoad(() => readBets(caps, { userId: player?.id, type: type || undefined, kind: kind || undefined, first: 50 }), [player?.id, type, kind]);
  const applyPlayer = async (e: FormEvent) => {
    e.preventDefault();
    setFilterError(undefined);
    setKind(kindText.trim());
    if (!playerText.trim()) return setPlayer(undefined);
    try {
      setPlayer(await findPlayer(caps, playerText.trim()));
    } catch (err) {
      setFilterError((err as Error).message);
    }
  };
  const live = caps.subscription.has("hubBetAlert");
  // A live alert refreshes the list below too, at most once a second.
  const refreshTimer = useRef<number | undefined>(undefined);
  useEffect(() => () => window.clearTimeout(refreshTimer.current), []);
  const refreshSoon = () => {
    if (refreshTimer.current !== undefined) return;
    refreshTimer.current = window.setTimeout(() => {
      refreshTimer.current = undefined;
      bets.reload();
    }, 1000);
  };
  return (
    <div className="stack">
      <h1>Bets</h1>
      <form className="row filters" onSubmit={applyPlayer}>
        <label>
          Game
          <select value={type} onChange={(e) => setType(e.target.value)}>
            <option value="">All games</option>
            {kinds.map((k) => (
              <option key={k} value={k}>
                {k}
              </option>
            ))}
          </select>
        </label>
        {withKinds && (
          <label>
            Kind
            <input aria-label="Kind filter" placeholder="e.g. DICE" value={kindText} onChange={(e) => setKindText(e.target.value)} />
          </label>
        )}
        <label>
          Player
          <input aria-label="Player filter" placeholder="Name" value={playerText} onChange={(e) => setPlayerText(e.target.value)} />
        </label>
        <button type="submit">Filter</button>
        {player && (
          <span className="chip">
            {player.uname}{" "}
            <button
              className="link"
              type="button"
              onClick={() => {
                setPlayer(undefined);
                setPlayerText("");
              }}
            >
              ×
            </button>
          </span>
        )}
      </form>
      <ErrorBox error={filterError} />
      {live ? (
        <LiveFeed userId={player?.id} onAlert={refreshSoon} />
      ) : (
        <NotAvailable what="The live feed" needs={["the subscription hubBetAlert"]} />
      )}
      {live && type && <p className="muted">Live alerts carry no game, so the game filter applies to the list below only.</p>}
      <Section title="Latest bets" actions={<button onClick={bets.reload}>Refresh</button>}>
        {sources.length === 0 && <NotAvailable what="Bet lists" needs={["a type implementing Bet"]} />}
        <Loading when={bets.loading && !bets.data} />
        <ErrorBox error={bets.error} />
        <Table testId="bets" head={BET_HEAD} rows={(bets.data ?? []).map(betRowCells)} empty="No bets match." />
      </Section>
    </div>
  );
}

function Verify({ bet }: { bet: any }) {
  const caps = useCaps();
  const fair = caps.query.has("hubHashById") && bet.hashId;
  const result = useLoad(async () => {
    if (!fair) return undefined;
    const data = await gql<{ hubHashById: any }>(
      `query HubDashboardHash($id: UUID!) { hubHashById(id: $id) { id kind digest iteration clientSeed hashChainId } }`,
      { id: bet.hashId },
    );
    const hash = data.hubHashById;
    if (!hash) throw new Error(`The hash ${bet.hashId} is not readable.`);
    let chain: any;
    if (caps.query.has("hubHashChainById")) {
      const preimage = caps.types.get("HubHashChain")?.fields.has("preimageHash") ? "preimageHash { digest }" : "";
      chain = (await gql<{ hubHashChainById: any }>(`query HubDashboardChain($id: UUID!) { hubHashChainById(id: $id) { id active currentIteration maxIteration ${preimage} } }`, { id: hash.hashChainId })).hubHashChainById;
    }
    // The next iteration's hash, revealed before this one, commits to it.
    let nextDigest: string | undefined;
    if (caps.query.has("hubHashByHashChainIdAndIteration")) {
      const next = await gql<{ hubHashByHashChainIdAndIteration: { digest: string } | null }>(
        `query HubDashboardNextHash($chain: UUID!, $iteration: Int!) { hubHashByHashChainIdAndIteration(hashChainId: $chain, iteration: $iteration) { digest } }`,
        { chain: hash.hashChainId, iteration: hash.iteration + 1 },
      );
      nextDigest = next.hubHashByHashChainIdAndIteration?.digest;
    }
    const outcomes: any[] = Array.isArray(bet.outcomes) ? bet.outcomes : [];
    const weights = outcomes.map((o) => Number(o?.weight ?? 0));
    const verification: Verification | undefined = hash.clientSeed !== null ? await verifyBet({ digest: hash.digest, clientSeed: hash.clientSeed, weights, outcomeIdx: bet.outcomeIdx, nextDigest }) : undefined;
    // Once the chain is revealed, its preimage proves every hash of it.
    const preimage: boolean | undefined | null = chain?.preimageHash ? await fromPreimage(chain.preimageHash.digest, hash.iteration, hash.digest) : null;
    return { hash, chain, nextDigest, verification, preimage };
  }, [bet.id]);
  if (!bet.hashId) return <p className="muted">This game's bets carry no hash: nothing to verify (provably fair bets have one).</p>;
  if (!fair) return <NotAvailable what="Provably fair verification" needs={["hubHashById"]} />;
  if (result.loading) return <Loading when />;
  if (result.error) return <ErrorBox error={result.error} />;
  const { hash, chain, verification, preimage } = result.data!;
  return (
    <Section title="Provably fair">
      <dl className="kv">
        <dt>Hash (iteration {hash.iteration})</dt>
        <dd>
          <code title={`as the hub sends it: ${hash.digest}`}>{hexOf(digestBytes(hash.digest))}</code>
        </dd>
        <dt>Client seed</dt>
        <dd>
          <code>{text(hash.clientSeed)}</code>
        </dd>
        {chain && (
          <>
            <dt>Chain</dt>
            <dd>
              {short(chain.id)} · {chain.preimageHash ? "revealed" : chain.active ? "active" : "retired"} · iteration {chain.currentIteration} of {chain.maxIteration}
            </dd>
          </>
        )}
        {verification && (
          <>
            <dt>HMAC-SHA256(hash, seed)</dt>
            <dd>
              <code>{verification.finalHash}</code> → {verification.fraction.toFixed(10)}
            </dd>
            <dt>Outcome</dt>
            <dd data-testid="verify-outcome" className={verification.outcomeMatches === undefined ? "" : verification.outcomeMatches ? "pos" : "neg"}>
              {verification.outcomeMatches === undefined
                ? "This game does not save its outcomes: the drawn outcome cannot be checked here."
                : verification.outcomeMatches
                  ? `✔ outcome ${verification.computedIdx} as recorded`
                  : `✘ computed outcome ${verification.computedIdx}, recorded ${bet.outcomeIdx}`}
            </dd>
            <dt>Chain link</dt>
            <dd data-testid="verify-chain" className={verification.chainMatches === false ? "neg" : verification.chainMatches ? "pos" : ""}>
              {verification.chainMatches === undefined
                ? "The next iteration's hash is not available to check against."
                : verification.chainMatches
                  ? `✔ SHA-256 of this hash is the hash of iteration ${hash.iteration + 1}`
                  : `✘ SHA-256 of this hash is not the hash of iteration ${hash.iteration + 1}`}
            </dd>
          </>
        )}
        <dt>Preimage</dt>
        <dd data-testid="verify-preimage" className={preimage === true ? "pos" : preimage === false ? "neg" : ""}>
          {preimage === null
            ? "Not revealed yet: the chain's preimage proves every hash of it once the player reveals it."
            : preimage === undefined
              ? `Revealed; this hash is more than ${MAX_PREIMAGE_WALK.toLocaleString("en")} steps from it, too many to check here.`
              : preimage
                ? `✔ SHA-256 applied ${hash.iteration} times to the revealed preimage gives this hash`
                : `✘ SHA-256 applied ${hash.iteration} times to the revealed preimage does not give this hash`}
        </dd>
      </dl>
      {!verification && <p className="muted">No client seed on this bet: its outcome cannot be checked.</p>}
    </Section>
  );
}

function BetDetail({ type, id }: { type: string; id: string }) {
  const caps = useCaps();
  const source = betSources(caps).find((s) => s.type === type);
  const fields = scalarFields(caps, type).map((f) => f.name);
  const outcomesField = caps.types.get(type)?.fields.get("outcomes");
  const outcomesSelection = outcomesField ? (outcomesField.kind === "OBJECT" ? "outcomes { weight profit }" : "outcomes") : "";
  const bet = useLoad(async () => {
    if (!source?.byIdField) return undefined;
    const data = await gql<{ bet: any }>(`query HubDashboardBet($id: UUID!) { bet: ${source.byIdField}(id: $id) { ${fields.join(" ")} ${outcomesSelection} ${source.fields.has("hubUserByUserId") ? "hubUserByUserId { uname }" : ""} } }`, { id });
    return data.bet;
  }, [type, id]);
  if (!source?.byIdField) return <NotAvailable what={`Bets of type ${type}`} needs={[`${type}ById`]} />;
  return (
    <div className="stack">
      <p>
        <a href="#/bets">← Bets</a>
      </p>
      <h1>
        {type} <small className="muted">{short(id)}</small>
      </h1>
      <Loading when={bet.loading} />
      <ErrorBox error={bet.error} />
      {bet.data === null && <p className="error">No {type} has the id {id}.</p>}
      {bet.data && (
        <>
          <Section title="Bet">
            <dl className="kv">
              {bet.data.hubUserByUserId && (
                <>
                  <dt>Player</dt>
                  <dd>
                    <a href={`#/players/${bet.data.userId}`}>{bet.data.hubUserByUserId.uname}</a>
                  </dd>
                </>
              )}
              {[...fields, ...(outcomesField ? ["outcomes"] : [])].map((f) => (
                <div key={f} className="kv-row">
                  <dt>{f}</dt>
                  <dd>{text(bet.data[f])}</dd>
                </div>
              ))}
            </dl>
          </Section>
          <Verify bet={bet.data} />
        </>
      )}
    </div>
  );
}

export function Bets({ betType, betId }: { betType?: string | undefined; betId?: string | undefined }) {
  // Keyed: another bet is a new page, never the previous one's figures while loading.
  if (betType && betId) return <BetDetail key={`${betType}/${betId}`} type={betType} id={betId} />;
  return <Feed />;
}
