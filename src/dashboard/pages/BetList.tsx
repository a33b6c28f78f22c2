import { betSources, gql, uuidTime, type BetSource, type Capabilities } from "../api.js";
import { fmt, fmtDelta, fmtTime, short } from "../ui.js";

export interface BetRow {
  type: string;
  id: string;
  wager: number;
  net: number;
  currencyKey: string;
  userId: string;
  uname?: string | undefined;
  kind?: string | undefined;
}

/**
 * The newest bets of every bet table (or of one), merged newest first: each
 * table is read with the same condition and the pages merged by the time in
 * their UUIDv7 ids.
 */
export async function readBets(caps: Capabilities, options: { userId?: string | undefined; type?: string | undefined; kind?: string | undefined; first?: number }): Promise<BetRow[]> {
  const sources = betSources(caps).filter((s) => !options.type || s.type === options.type);
  const first = options.first ?? 50;
  const lists = await Promise.all(
    sources.map(async (source: BetSource) => {
      const withUser = source.fields.has("hubUserByUserId");
      const withKind = source.fields.has("kind");
      // A game's own kinds (HubOutcomeBet.kind) are filtered here, on the newest rows read:
      // the generated conditions cover indexed columns only.
      if (options.kind && !withKind) return [];
      const condition = options.userId ? { userId: options.userId } : {};
      const data: any = await gql(
        `query HubDashboardBets($condition: ${source.type}Condition, $first: Int!) {
          list: ${source.listField}(condition: $condition, orderBy: PRIMARY_KEY_DESC, first: $first) {
            nodes { id wager net currencyKey userId ${withKind ? "kind" : ""} ${withUser ? "hubUserByUserId { uname }" : ""} } } }`,
        { condition, first: options.kind ? Math.max(first, 500) : first },
      );
      return (data.list.nodes as any[]).filter((n) => !options.kind || n.kind === options.kind).map(
        (n): BetRow => ({ type: source.type, id: n.id, wager: n.wager, net: n.net, currencyKey: n.currencyKey, userId: n.userId, uname: n.hubUserByUserId?.uname, kind: n.kind }),
      );
    }),
  );
  return lists
    .flat()
    .sort((a, b) => uuidTime(b.id) - uuidTime(a.id) || (a.id < b.id ? 1 : -1))
    .slice(0, first);
}

export function betRowCells(bet: BetRow) {
  return [
    fmtTime(new Date(uuidTime(bet.id)).toISOString()),
    <a href={`#/bets/${encodeURIComponent(bet.type)}/${bet.id}`}>{bet.kind ? `${bet.type} · ${bet.kind}` : bet.type}</a>,
    bet.uname !== undefined ? <a href={`#/players/${bet.userId}`}>{bet.uname}</a> : short(bet.userId),
    `${fmt(bet.wager)} ${bet.currencyKey}`,
    <span className={bet.net > 0 ? "pos" : "neg"}>{fmtDelta(bet.net)}</span>,
  ];
}
export const BET_HEAD = ["Time", "Game", "Player", "Wager", "Player's net"];
