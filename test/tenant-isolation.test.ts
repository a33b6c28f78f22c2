import "./helpers/env.js";
import t, { type Test } from "tap";
import pg from "pg";
import { defaultPlugins } from "@hubpkg/hub";
import { startTestServer, type TestServer } from "@hubpkg/hub/test";
import { FortunePlugin, CoinflipPlanPlugin, CoinflipBetPlugin, referenceMigrationsPath } from "@hubpkg/hub/plugins";
import { injectGql } from "./helpers/inject.js";
import { makeOperator, makePlayer, type Player } from "./helpers/credentials.js";
import { createHashChain } from "@hubpkg/hub/test";
import { makeOutcomeBet } from "@hubpkg/hub/hash-chain";
import { loadSchemaModel, printType, selectionOf, type SchemaModel } from "./helpers/schema-model.js";

/*
 * Tenant isolation, as a matrix driven by the introspected schema: every table
 * type the API exposes (found through its allX connection and its lookups),
 * every unique lookup (of every row, other tenants' included), every
 * hubCurrentX root and every relation field two levels deep, read by player A
 * (casino 1 / user alice / experience 1) and its mirror image, by the six other
 * players of 2 casinos × 2 users × 2 experiences (roots, lookups, hubCurrentX),
 * by an operator, anonymously and with dead credentials, and by all of them
 * interleaved at once. A table added to the schema is
 * covered without editing this file (only its seed rows must be added; the
 * coverage check below says so).
 *
 * What a player may see (the oracle, independent of the SQL policies):
 *  - a type returned by a hubCurrentX root (casino, user, experience, session):
 *    only the row of its own session;
 *  - otherwise, a row whose owner columns (userId, casinoId, experienceId: the
 *    ones the type has) all equal the player's; a null owner is not the player's
 *    (so the house rows of the ledger are hidden). Casino-scoped tables
 *    (currency) have only casinoId, so the whole casino sees them;
 *  - the house bankroll (HubBankroll), the transfer worker's items
 *    (HubTransferJob), transfer settings and the token keys fetched (HubJwkSet,
 *    HubJwkSetSnapshot, HubJwkSetFailure) are the casino's business: no
 *    player sees any of them;
 *  - a type with none of those columns (api keys): nothing.
 *  - the chat is the experience's: a message (not hidden) and a mod are seen by
 *    every player of their casino and experience; a mute by its player, and by
 *    the mods of its experience.
 * The operator sees every row; an anonymous request sees none.
 *
 * The queries go through inject() (helpers/inject.ts): what is under test is
 * the hub's identity and row-level security, which run the same without a socket.
 */

const OWNER_FIELDS = ["userId", "casinoId", "experienceId"] as const;
/** The casino's business: rows no player sees at all (the house bankroll, the transfer worker's state and settings). */
/** Lookups by a value the hub answers masked (the key is stored only as a digest): test/original-surface.test.ts looks them up by the real key. */
const MASKED_LOOKUPS = new Set(["hubApiKeyByKey"]);
const OPERATOR_ONLY = new Set(["HubBankroll", "HubTransferJob", "HubCasinoTransferConfig", "HubJwkSet", "HubJwkSetSnapshot", "HubJwkSetFailure"]);

type Row = Record<string, any>;
type Who =
  | { kind: "anon"; label: string; headers: Record<string, string> }
  | { kind: "operator"; label: string; headers: Record<string, string> }
  | { kind: "player"; label: string; headers: Record<string, string>; player: Player; current: Map<string, string> };

let hub: TestServer;
let db: pg.Pool;
let model: SchemaModel;
let operator: Who;
const players = new Map<string, Player>(); // "c1/alice/exp-1" → player
/** Every row of every table type, as the operator reads it (leaves only). */
const universe = new Map<string, Row[]>();
let totalQueries = 0;

const CASINOS = ["iso-c1", "iso-c2"];
const USERS = ["alice", "bob"];
const EXPERIENCES = ["exp-1", "exp-2"];
const playerKey = (c: string, u: string, e: string) => `${c}/${u}/${e}`;

t.before(async () => {
  // A database of the test kit's shared cluster (a template copy): no initdb of its own.
  hub = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: referenceMigrationsPath,
    plugins: [...defaultPlugins, FortunePlugin, CoinflipPlanPlugin, CoinflipBetPlugin],
  });
  db = new pg.Pool({ connectionString: hub.superuserDatabaseUrl, max: 4 });
  const op = await makeOperator(hub.superuserDatabaseUrl);
  operator = { kind: "operator", label: "operator", headers: op.header };
  await seed();
  await seedProvablyFair();
  model = await loadSchemaModel(hub.url, op.header);
  await loadUniverse();
});

/** (Re)read every row of every table as the operator. */
async function loadUniverse() {
  const doc = `{ ${model.rootConnections.map((r) => `${r.field} { totalCount nodes { ${selectionOf(model, r.type, 0)} } }`).join(" ")} }`;
  const res = await injectGql(hub, doc, {}, operator.headers);
  if (res.body.errors || !res.body.data) throw new Error(`operator read failed: ${JSON.stringify(res.body.errors)}`);
  for (const r of model.rootConnections) universe.set(r.type, res.body.data[r.field].nodes as Row[]);
  operatorCache.clear();
}
t.teardown(async () => {
  await db?.end();
  await hub?.stop();
});

/** Two casinos × two users × two experiences, with rows in every table. */
async function seed() {
  for (const c of CASINOS) for (const u of USERS) for (const e of EXPERIENCES) {
    players.set(playerKey(c, u, e), await makePlayer(hub.superuserDatabaseUrl, u, { casinoName: c, experienceName: e }));
  }
  // A second, revoked API key; the operator's own is the first.
  await db.query("insert into hub.api_key (key_digest, revoked_at) values (sha256('iso-revoked'::bytea), now())");
  for (const c of CASINOS) {
    const casinoId = players.get(playerKey(c, "alice", "exp-1"))!.casinoId;
    await db.query("update hub.casino set base_url = $2 where id = $1", [casinoId, `https://${c}.example`]);
    await db.query("insert into hub.casino_transfer_config (casino_id) values ($1)", [casinoId]);
    await db.query("insert into hub.transfer_job (kind, casino_id, status) values ('POLL', $1, 'DONE')", [casinoId]);
    // The casino's token keys as fetched, and a snapshot of them.
    await db.query("insert into hub.jwk_set (casino_id, jwks) values ($1, $2)", [casinoId, { keys: [{ kid: c }] }]);
    await db.query("insert into hub.jwk_set_snapshot (casino_id, jwks) values ($1, $2)", [casinoId, { keys: [{ kid: c }] }]);
    await db.query("insert into hub.jwk_set_failure (casino_id, jwks_url, message) values ($1, $2, 'seed')", [casinoId, `https://${c}.example/jwks.json`]);
    // The same currency keys in both casinos: a lookup by key alone would mix them up.
    for (const key of ["CHIPS", "GEMS"]) {
      await db.query("insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale) values ($1, $2, $1, 1)", [key, casinoId]);
      await db.query("select hub_hidden.ensure_bankroll($1, $2, 1000, 'seed')", [casinoId, key]);
      await db.query("select hub_hidden.adjust_bankroll($1, $2, -10, 'seed', 'house withdrawal')", [casinoId, key]);
    }
  }
  for (const p of players.values()) {
    for (const key of ["CHIPS", "GEMS"]) {
      await db.query("select hub_hidden.credit_balance($1, $2, $3, $4, 100, 'seed', 'deposit')", [p.userId, p.casinoId, p.experienceId, key]);
      await db.query("select hub_hidden.debit_balance($1, $2, $3, $4, 5, 'seed', 'withdrawal')", [p.userId, p.casinoId, p.experienceId, key]);
    }
    await db.query("insert into app.coinflip (wager, net, currency_key, user_id, casino_id, experience_id) values (1, -1, 'CHIPS', $1, $2, $3)", [
      p.userId,
      p.casinoId,
      p.experienceId,
    ]);
    // A deposit and a withdrawal with the casino, with the worker's items (done, so no worker acts on them).
    const transferId = `iso-${p.userId}-${p.experienceId}`;
    await db.query("insert into hub.deposit (casino_id, mp_transfer_id, user_id, experience_id, currency_key, amount) values ($1, $2, $3, $4, 'GEMS', 7)", [
      p.casinoId, transferId, p.userId, p.experienceId,
    ]);
    await db.query("insert into hub.transfer_job (kind, casino_id, mp_transfer_id, status) values ('ACKNOWLEDGE', $1, $2, 'DONE')", [p.casinoId, transferId]);
    const request = await db.query<{ id: string }>(
      "insert into hub.withdrawal_request (casino_id, user_id, experience_id, currency_key, amount, mp_transfer_id) values ($1, $2, $3, 'GEMS', 3, $4) returning id",
      [p.casinoId, p.userId, p.experienceId, `out-${transferId}`],
    );
    await db.query(
      "insert into hub.withdrawal (withdrawal_request_id, casino_id, user_id, experience_id, currency_key, amount, status, mp_transfer_id) values ($1, $2, $3, $4, 'GEMS', 3, 'COMPLETED', $5)",
      [request.rows[0]!.id, p.casinoId, p.userId, p.experienceId, `out-${transferId}`],
    );
    await db.query("insert into hub.transfer_job (kind, casino_id, withdrawal_request_id, status) values ('WITHDRAWAL', $1, $2, 'DONE')", [p.casinoId, request.rows[0]!.id]);
    // A completed take request with its worker item (done).
    const take = await db.query<{ id: string }>(
      `insert into hub.take_request (mp_take_request_id, casino_id, user_id, experience_id, currency_key, amount, reserved_amount, status, mp_status, mp_transfer_id, mp_transfer_status)
       values (gen_random_uuid(), $1, $2, $3, 'GEMS', 2, 2, 'COMPLETED', 'TRANSFERRED', gen_random_uuid(), 'COMPLETED') returning id`,
      [p.casinoId, p.userId, p.experienceId],
    );
    await db.query("insert into hub.transfer_job (kind, casino_id, take_request_id, status) values ('TAKE', $1, $2, 'DONE')", [p.casinoId, take.rows[0]!.id]);
    // A lost bet of 10, booked as a game books it: both ledger rows carry the bet's id.
    const betId = (await db.query("select hub_hidden.uuid_generate_v7() as id")).rows[0].id as string;
    const after = await db.query("select amount from hub_hidden.debit_balance($1, $2, $3, 'CHIPS', 10, 'seed', 'bet', $4)", [p.userId, p.casinoId, p.experienceId, betId]);
    await db.query("select hub_hidden.adjust_bankroll($1, 'CHIPS', 10, 'seed', 'bet', $2)", [p.casinoId, betId]);
    await db.query(
      `insert into app.coinflip_bet (id, wager, net, currency_key, user_id, casino_id, experience_id, side, outcome, balance_after)
       values ($1, 10, -10, 'CHIPS', $2, $3, $4, 'HEADS', 'TAILS', $5)`,
      [betId, p.userId, p.casinoId, p.experienceId, after.rows[0].amount],
    );
    // A hash chain with its terminal hash and an outcome bet on it (hub.hash_chain, hub.hash, hub.outcome_bet).
    const chain = await createHashChain(db, { userId: p.userId, casinoId: p.casinoId, experienceId: p.experienceId, maxIteration: 10 });
    const bet = await makeOutcomeBet(
      db,
      p,
      { kind: "SEED", wager: 1, currency: "CHIPS", outcomes: [{ weight: 1, profit: 0.98 }, { weight: 1, profit: -1 }], hashChainId: chain.id, clientSeed: "seed" },
      { houseEdge: 0.01, saveOutcomes: true },
    );
    if (bet.__typename !== "HubMakeOutcomeBetSuccess") throw new Error(`seed bet: ${bet.__typename}`);
    // Chat: the player's message, a hidden one, and a mute of the player.
    for (const hidden of [null, "now()"]) {
      await db.query(
        `insert into hub.chat_message (casino_id, experience_id, user_id, type, client_id, body, hidden_at) values ($1, $2, $3, 'user', gen_random_uuid(), 'seed', ${hidden ?? "null"})`,
        [p.casinoId, p.experienceId, p.userId],
      );
    }
    await db.query("insert into hub.chat_mute (casino_id, experience_id, user_id, reason, muted_by) values ($1, $2, $3, 'seed', 'seed')", [p.casinoId, p.experienceId, p.userId]);
    await db.query("insert into hub.faucet_claim (user_id, casino_id, experience_id, currency_key, amount) values ($1, $2, $3, 'GEMS', 3)", [p.userId, p.casinoId, p.experienceId]);
  }
  // Per experience, a system message; bob is a mod of exp-1 in each casino.
  for (const c of CASINOS) for (const e of EXPERIENCES) {
    const p = players.get(playerKey(c, "bob", e))!;
    await db.query("insert into hub.chat_message (casino_id, experience_id, type, client_id, body) values ($1, $2, 'system', gen_random_uuid(), 'seed')", [p.casinoId, p.experienceId]);
    if (e === "exp-1") await db.query("insert into hub.chat_mod (casino_id, experience_id, user_id) values ($1, $2, $3)", [p.casinoId, p.experienceId, p.userId]);
  }
}

/**
 * Per player: a second, retired hash chain (seed() made the active one) with its terminal hash and two used hashes, an
 * outcome bet on one and a tower game whose first floor took the other
 * (rows as the games write them, without the seed the hub would keep).
 */
async function seedProvablyFair() {
  for (const p of players.values()) {
    const chain = (
      await db.query("insert into hub.hash_chain (user_id, casino_id, experience_id, max_iteration, current_iteration, active) values ($1, $2, $3, 10, 8, false) returning id", [
        p.userId,
        p.casinoId,
        p.experienceId,
      ])
    ).rows[0].id as string;
    const hash = async (kind: string, iteration: number, clientSeed: string | null) =>
      (await db.query("insert into hub.hash (hash_chain_id, kind, digest, iteration, client_seed) values ($1, $2, sha256(gen_random_uuid()::text::bytea), $3, $4) returning id", [chain, kind, iteration, clientSeed])).rows[0]
        .id as string;
    await hash("TERMINAL", 10, null);
    const betHash = await hash("INTERMEDIATE", 9, "seed");
    const moveHash = await hash("INTERMEDIATE", 8, "seed");
    await db.query(
      `insert into hub.outcome_bet (kind, wager, profit, net, outcome_idx, currency_key, hash_id, user_id, casino_id, experience_id)
       values ('GENERAL', 10, -1, -10, 1, 'CHIPS', $1, $2, $3, $4)`,
      [betHash, p.userId, p.casinoId, p.experienceId],
    );
    const game = (
      await db.query(
        `insert into app.tower_game (wager, net, currency_key, user_id, casino_id, experience_id, status, floor, max_floor, finished_at)
         values (10, -10, 'CHIPS', $1, $2, $3, 'BUSTED', 0, 10, now()) returning id`,
        [p.userId, p.casinoId, p.experienceId],
      )
    ).rows[0].id as string;
    await db.query(
      `insert into app.tower_move (game_id, floor, tile, trap_tile, hash_id, user_id, casino_id, experience_id) values ($1, 1, 0, 0, $2, $3, $4, $5)`,
      [game, moveHash, p.userId, p.casinoId, p.experienceId],
    );
  }
}

// ---------------------------------------------------------------------------
// the oracle

function playerWho(key: string): Extract<Who, { kind: "player" }> {
  const player = players.get(key)!;
  const current = new Map<string, string>();
  for (const c of model.currents) {
    // hubCurrentCasino → casinoId, hubCurrentSession → sessionId, …
    const prop = c.field.replace(/^hubCurrent/, "").replace(/^./, (ch) => ch.toLowerCase()) + "Id";
    const value = (player as unknown as Record<string, unknown>)[prop];
    if (typeof value !== "string") throw new Error(`no expected value for ${c.field} (looked for player.${prop})`);
    current.set(c.type, value);
  }
  return { kind: "player", label: key, headers: player.header, player, current };
}

function visible(who: Who, type: string, row: Row): boolean {
  if (who.kind === "anon") return false;
  if (who.kind === "operator") return true;
  if (OPERATOR_ONLY.has(type)) return false;
  // A hash is visible exactly when its chain is.
  if (type === "HubHash") {
    const chain = universe.get("HubHashChain")?.find((c) => c.id === row.hashChainId);
    return chain !== undefined && visible(who, "HubHashChain", chain);
  }
  const inExperience = row.casinoId === who.player.casinoId && row.experienceId === who.player.experienceId;
  if (type === "HubChatMessage") return inExperience && row.hiddenAt === null;
  if (type === "HubChatMod") return inExperience;
  if (type === "HubChatMute") {
    const isMod = universe.get("HubChatMod")?.some((m) => m.userId === who.player.userId && m.experienceId === who.player.experienceId) === true;
    return inExperience && (row.userId === who.player.userId || isMod);
  }
  const current = who.current.get(type);
  if (current !== undefined) return row.id === current;
  const leaves = model.tables.get(type)!.leaves;
  const owners = OWNER_FIELDS.filter((f) => leaves.includes(f));
  if (owners.length === 0) return false;
  return owners.every((f) => row[f] === who.player[f]);
}

/** The players a chat row the identity may read names (userId): a chat shows who wrote, though not their user row. */
function chatAuthors(who: Who): Set<string> {
  const ids = new Set<string>();
  for (const type of ["HubChatMessage", "HubChatMod", "HubChatMute"]) {
    for (const row of universe.get(type) ?? []) if (typeof row.userId === "string" && visible(who, type, row)) ids.add(row.userId);
  }
  return ids;
}

const rowKey = (row: Row): string => (typeof row.id === "string" ? row.id : JSON.stringify(Object.entries(row).filter(([, v]) => typeof v !== "object").sort()));
const brief = (type: string, row: Row) =>
  `${type} ${JSON.stringify(Object.fromEntries(Object.entries(row).filter(([k, v]) => v !== null && typeof v !== "object" && (k === "id" || k === "key" || OWNER_FIELDS.includes(k as never) || k === "account"))))}`;

// ---------------------------------------------------------------------------
// running and comparing

interface Checker {
  who: Who;
  violations: string[];
  queries: number;
  rowsCompared: number;
  /** Every string value of every response (for the foreign-id scan). */
  seen: Set<string>;
}

const operatorCache = new Map<string, Promise<Row>>();

async function run(c: Checker, doc: string, variables: Record<string, unknown> = {}): Promise<Row | undefined> {
  const res = await injectGql(hub, doc, variables, c.who.headers);
  if (res.status !== 200 || res.body.errors || !res.body.data) {
    c.violations.push(`ERROR as ${c.who.label}: ${res.status} ${JSON.stringify(res.body.errors)} for ${doc.slice(0, 200)}`);
    return undefined;
  }
  collectStrings(res.body.data, c.seen);
  return res.body.data;
}

function asOperator(doc: string): Promise<Row> {
  let cached = operatorCache.get(doc);
  if (!cached) {
    cached = injectGql(hub, doc, {}, operator.headers).then((res) => {
      if (res.status !== 200 || res.body.errors || !res.body.data) throw new Error(`operator: ${res.status} ${JSON.stringify(res.body.errors)} for ${doc}`);
      return res.body.data;
    });
    operatorCache.set(doc, cached);
  }
  return cached;
}

function collectStrings(value: unknown, into: Set<string>) {
  if (typeof value === "string") into.add(value);
  else if (Array.isArray(value)) for (const v of value) collectStrings(v, into);
  else if (value && typeof value === "object") for (const v of Object.values(value)) collectStrings(v, into);
}

/** A connection read as `who` against the same connection read by the operator. */
function compareConnection(c: Checker, type: string, mine: { totalCount: number; nodes: (Row | null)[] }, all: { nodes: Row[] }, path: string) {
  const expected = all.nodes.filter((r) => visible(c.who, type, r));
  if (mine.totalCount !== expected.length) {
    c.violations.push(`COUNT as ${c.who.label}: ${path}.totalCount is ${mine.totalCount}, expected ${expected.length}`);
  }
  compareRows(c, type, mine.nodes, expected, path);
}

function compareRows(c: Checker, type: string, mine: (Row | null)[], expected: Row[], path: string) {
  const byKey = new Map(expected.map((r) => [rowKey(r), r]));
  const got = new Set<string>();
  for (const row of mine) {
    c.rowsCompared++;
    if (row === null) {
      c.violations.push(`NULL NODE as ${c.who.label}: ${path}`);
      continue;
    }
    const key = rowKey(row);
    got.add(key);
    if (!visible(c.who, type, row)) c.violations.push(`LEAK as ${c.who.label}: ${path} returned ${brief(type, row)}`);
    const match = byKey.get(key);
    if (!match) {
      if (visible(c.who, type, row)) c.violations.push(`UNEXPECTED as ${c.who.label}: ${path} returned ${brief(type, row)} (not in the operator's result)`);
      continue;
    }
    compareRelations(c, type, row, match, path);
  }
  for (const [key, row] of byKey) if (!got.has(key)) c.violations.push(`MISSING as ${c.who.label}: ${path} lacks ${brief(type, row)}`);
}

function compareRelations(c: Checker, type: string, mine: Row, theirs: Row, path: string) {
  for (const rel of model.tables.get(type)!.relations) {
    if (!(rel.field in mine)) continue;
    const here = `${path}.${rel.field}`;
    if (rel.many) {
      compareConnection(c, rel.target, mine[rel.field], theirs[rel.field], here);
    } else {
      const other: Row | null = theirs[rel.field];
      const expected = other && visible(c.who, rel.target, other) ? other : null;
      compareRows(c, rel.target, mine[rel.field] === null ? [] : [mine[rel.field]], expected ? [expected] : [], here);
    }
  }
}

/** Run `count` jobs with at most `width` in flight. */
async function pooled(count: number, width: number, job: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, count) }, async () => {
      while (next < count) await job(next++);
    }),
  );
}

/** The whole matrix for one identity; returns what it checked. */
async function checkIdentity(who: Who, opts: { relations: boolean } = { relations: true }): Promise<Checker> {
  const c: Checker = { who, violations: [], queries: 0, rowsCompared: 0, seen: new Set() };

  // 1. Every allX connection: nodes and totalCount.
  {
    const doc = `{ ${model.rootConnections.map((r) => `${r.field} { totalCount nodes { ${selectionOf(model, r.type, 0)} } }`).join(" ")} }`;
    const mine = await run(c, doc);
    if (mine) for (const r of model.rootConnections) compareConnection(c, r.type, mine[r.field], { nodes: universe.get(r.type)! }, r.field);
    c.queries += model.rootConnections.length;
  }

  // 2. The hubCurrentX roots: the session's own rows for a player, null otherwise.
  {
    const doc = `{ ${model.currents.map((r) => `${r.field} { ${selectionOf(model, r.type, 0)} }`).join(" ")} }`;
    const mine = await run(c, doc);
    if (mine) {
      for (const r of model.currents) {
        const expectedId = who.kind === "player" ? who.current.get(r.type) : undefined;
        const got = mine[r.field] as Row | null;
        if ((got?.id ?? undefined) !== expectedId) c.violations.push(`CURRENT as ${who.label}: ${r.field} is ${JSON.stringify(got?.id ?? null)}, expected ${JSON.stringify(expectedId ?? null)}`);
        if (got && !visible(who, r.type, got)) c.violations.push(`LEAK as ${who.label}: ${r.field} returned ${brief(r.type, got)}`);
      }
    }
    c.queries += model.currents.length;
  }

  // 3. Every unique lookup of every row of the table (other tenants' rows included).
  const lookupJobs: { doc: string; variables: Record<string, unknown>; checks: { alias: string; type: string; row: Row; field: string }[] }[] = [];
  for (const lookup of model.lookups) {
    const rows = universe.get(lookup.type) ?? [];
    // A masked value (an API key's key) or a casino's missing address ("") names no row to look up.
    if (MASKED_LOOKUPS.has(lookup.field)) continue;
    const usable = rows.filter((row) => lookup.args.every((a) => row[a.name] !== null && row[a.name] !== undefined && row[a.name] !== ""));
    for (let start = 0; start < usable.length; start += 40) {
      const batch = usable.slice(start, start + 40);
      const vars: string[] = [];
      const fields: string[] = [];
      const variables: Record<string, unknown> = {};
      const checks: (typeof lookupJobs)[number]["checks"] = [];
      batch.forEach((row, i) => {
        const args = lookup.args.map((a) => {
          const v = `v${i}_${a.name}`;
          vars.push(`$${v}: ${printType(a.type)}`);
          variables[v] = row[a.name];
          return `${a.name}: $${v}`;
        });
        fields.push(`r${i}: ${lookup.field}(${args.join(", ")}) { ${selectionOf(model, lookup.type, 0)} }`);
        checks.push({ alias: `r${i}`, type: lookup.type, row, field: lookup.field });
      });
      lookupJobs.push({ doc: `query(${vars.join(", ")}) { ${fields.join(" ")} }`, variables, checks });
    }
  }
  await pooled(lookupJobs.length, 6, async (i) => {
    const job = lookupJobs[i]!;
    const mine = await run(c, job.doc, job.variables);
    c.queries += job.checks.length;
    if (!mine) return;
    for (const check of job.checks) {
      const got = mine[check.alias] as Row | null;
      const expected = visible(who, check.type, check.row);
      c.rowsCompared++;
      if (got && !expected) c.violations.push(`LEAK as ${who.label}: ${check.field} returned ${brief(check.type, got)}`);
      else if (!got && expected) c.violations.push(`MISSING as ${who.label}: ${check.field} found nothing for ${brief(check.type, check.row)}`);
      else if (got && rowKey(got) !== rowKey(check.row)) c.violations.push(`WRONG ROW as ${who.label}: ${check.field} for ${brief(check.type, check.row)} returned ${brief(check.type, got)}`);
    }
  });

  // 4. Every relation field (two levels) from every row the identity reaches
  //    through an allX root, compared with the operator's answer to the same
  //    query; and from the hubCurrentX roots, checked against the oracle.
  //    (Not for an anonymous identity: its roots are checked empty above, so
  //    every relation query would start from nothing.)
  const relationJobs: { doc: string; root: string; type: string; rel: string; connection: boolean }[] = [];
  const walk = who.kind !== "anon" && opts.relations;
  if (walk) for (const r of model.rootConnections) {
    for (const rel of model.tables.get(r.type)!.relations) {
      relationJobs.push({ doc: `{ ${r.field} { totalCount nodes { ${selectionOf(model, r.type, 2, rel.field)} } } }`, root: r.field, type: r.type, rel: rel.field, connection: true });
    }
  }
  if (walk) for (const r of model.currents) {
    for (const rel of model.tables.get(r.type)!.relations) {
      relationJobs.push({ doc: `{ ${r.field} { ${selectionOf(model, r.type, 2, rel.field)} } }`, root: r.field, type: r.type, rel: rel.field, connection: false });
    }
  }
  await pooled(relationJobs.length, 6, async (i) => {
    const job = relationJobs[i]!;
    const mine = await run(c, job.doc);
    // The relation at depth 1 and each relation below it: one query each.
    const rel = model.tables.get(job.type)!.relations.find((x) => x.field === job.rel)!;
    c.queries += 1 + model.tables.get(rel.target)!.relations.length;
    if (!mine) return;
    if (job.connection) {
      compareConnection(c, job.type, mine[job.root], await asOperator(job.doc).then((d) => d[job.root]), job.root);
    } else {
      const row = mine[job.root] as Row | null;
      if (row) checkTreeAgainstOracle(c, job.type, row, job.root);
    }
  });

  // 5. Whatever was read, no id of a row the identity may not see appears in it.
  const foreign = new Map<string, string>();
  const authors = chatAuthors(who);
  for (const [type, rows] of universe) for (const row of rows) if (typeof row.id === "string" && !visible(who, type, row) && !authors.has(row.id)) foreign.set(row.id, brief(type, row));
  for (const value of c.seen) if (foreign.has(value)) c.violations.push(`FOREIGN ID as ${who.label}: a response contains the id of ${foreign.get(value)}`);

  return c;
}

/** The checks begun, by identity: a test awaits the one an earlier test began beside its own. */
const checks = new Map<string, Promise<Checker>>();
function checkOnce(who: Who, opts?: { relations: boolean }): Promise<Checker> {
  let check = checks.get(who.label);
  if (!check) {
    check = checkIdentity(who, opts);
    check.catch(() => undefined); // awaited by its own test, which fails with it
    checks.set(who.label, check);
  }
  return check;
}

const A = playerKey("iso-c1", "alice", "exp-1");
/** A's mirror image (the other casino, user and experience): the one other player whose relations are walked too. */
const MIRROR = playerKey("iso-c2", "bob", "exp-2");

/** No operator answer to compare with (hubCurrentX is null for an operator): every row must pass the oracle. */
function checkTreeAgainstOracle(c: Checker, type: string, row: Row, path: string) {
  c.rowsCompared++;
  if (!visible(c.who, type, row)) c.violations.push(`LEAK as ${c.who.label}: ${path} returned ${brief(type, row)}`);
  for (const rel of model.tables.get(type)!.relations) {
    if (!(rel.field in row)) continue;
    const value = row[rel.field];
    if (value === null) continue;
    if (rel.many) {
      if (value.totalCount !== value.nodes.length) c.violations.push(`COUNT as ${c.who.label}: ${path}.${rel.field}.totalCount ${value.totalCount} ≠ ${value.nodes.length} nodes`);
      for (const node of value.nodes) checkTreeAgainstOracle(c, rel.target, node, `${path}.${rel.field}`);
    } else {
      checkTreeAgainstOracle(c, rel.target, value, `${path}.${rel.field}`);
    }
  }
}

function report(t: Test, c: Checker) {
  totalQueries += c.queries;
  t.ok(c.queries > 0 && c.rowsCompared > 0, `${c.who.label}: ${c.queries} queries checked, ${c.rowsCompared} rows compared`);
  t.same(c.violations.slice(0, 20), [], `${c.who.label}: no leak, no missing row, no error (${c.violations.length} violations)`);
}

// ---------------------------------------------------------------------------

t.test("the schema model covers every table the API may read", async (t) => {
  const pascal = (s: string) => s.replace(/(^|_)([a-z0-9])/g, (_m, _u, ch: string) => ch.toUpperCase());
  const { rows } = await db.query<{ schema: string; table: string; hidden: boolean }>(
    `select n.nspname as schema, c.relname as table, coalesce(obj_description(c.oid, 'pg_class'), '') ~ '@behavior[^\\n]*-\\*' as hidden
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where c.relkind in ('r', 'v', 'm', 'p') and n.nspname in ('hub', 'app')
        and has_any_column_privilege('app_postgraphile', c.oid, 'SELECT')`,
  );
  const granted = rows.filter((r) => !r.hidden).map((r) => ({ ...r, type: (r.schema === "hub" ? "Hub" : "") + pascal(r.table) }));
  t.same(
    granted.map((r) => r.type).sort(),
    [...model.rootConnections.map((r) => r.type)].sort(),
    "every table app_postgraphile can read is an allX connection, and every allX connection is such a table",
  );
  t.ok(model.tables.size >= 11, `${model.tables.size} table types: ${[...model.tables.keys()].sort().join(", ")}`);
  t.comment(`roots: ${model.rootConnections.length} connections, ${model.lookups.length} lookups, ${model.currents.length} hubCurrentX; other query fields: ${model.otherQueryFields.join(", ")}`);
  t.comment(`relation fields: ${[...model.tables.values()].reduce((n, x) => n + x.relations.length, 0)}`);

  // The operator reads every row: its counts are the database's.
  const byType = new Map(granted.map((r) => [r.type, r]));
  const doc = `{ ${model.rootConnections.map((r) => `${r.field} { totalCount }`).join(" ")} }`;
  const counts = (await injectGql(hub, doc, {}, operator.headers)).body.data!;
  for (const r of model.rootConnections) {
    const table = byType.get(r.type);
    if (!table) continue;
    const n = (await db.query(`select count(*)::int as n from ${pg.escapeIdentifier(table.schema)}.${pg.escapeIdentifier(table.table)}`)).rows[0].n as number;
    t.equal(counts[r.field].totalCount, n, `operator: ${r.field}.totalCount = count(*) of ${table.schema}.${table.table}`);
    t.equal(universe.get(r.type)!.length, n, `operator: ${r.field} returns all ${n} rows`);
  }
});

t.test("the seed gives every table rows player A may see and rows A may not", async (t) => {
  const a = playerWho(playerKey("iso-c1", "alice", "exp-1"));
  const table: string[] = [];
  for (const r of model.rootConnections) {
    const rows = universe.get(r.type)!;
    const mine = rows.filter((row) => visible(a, r.type, row)).length;
    table.push(`${r.type}: ${mine}/${rows.length}`);
    t.ok(rows.length - mine > 0, `${r.type}: ${rows.length - mine} rows A may not see (seed rows of other tenants for a new table here)`);
    const leaves = model.tables.get(r.type)!.leaves;
    // Operator-only tables (the house bankroll) have no rows a player may see.
    const scoped = !OPERATOR_ONLY.has(r.type) && (a.current.has(r.type) || OWNER_FIELDS.some((f) => leaves.includes(f)));
    if (scoped) t.ok(mine > 0, `${r.type}: ${mine} rows A may see`);
  }
  t.comment(`rows visible to A / all: ${table.join(", ")}`);
  // Explicitly, in the seed: the rows a leak would show.
  t.ok(universe.get("HubLedger")!.some((r) => r.account === "house" && r.casinoId === a.player.casinoId), "casino 1 has house ledger rows (hidden from players)");
  t.ok(universe.get("HubLedger")!.some((r) => r.betId !== null), "ledger rows linked to bets exist");
});

t.test("player A (casino 1 / experience 1) reads only its own rows through every query", async (t) => {
  // The mirror image and the operator walk the same relation queries: begun beside A's walk, each
  // query text is parsed and planned once for both players (and once for the operator) while the
  // server's document cache (16 MiB, least recently used out) still holds it, not once per identity.
  void checkOnce(playerWho(MIRROR));
  void checkOnce(operator);
  const c = await checkOnce(playerWho(A));
  report(t, c);
  // Spelled out: nothing of bob, of experience 2 or of casino 2.
  const others = [...players.entries()].filter(([k]) => k !== playerKey("iso-c1", "alice", "exp-1"));
  const forbidden = new Set<string>();
  const authors = chatAuthors(playerWho(playerKey("iso-c1", "alice", "exp-1")));
  for (const [k, p] of others) {
    if (p.userId !== players.get(playerKey("iso-c1", "alice", "exp-1"))!.userId && !authors.has(p.userId)) forbidden.add(p.userId);
    if (!k.startsWith("iso-c1/")) forbidden.add(p.casinoId);
    if (!k.endsWith("/exp-1") || !k.startsWith("iso-c1/")) forbidden.add(p.experienceId);
    forbidden.add(p.sessionId);
  }
  t.same([...forbidden].filter((id) => c.seen.has(id)), [], "no id of user B, of experience 2, of casino 2 or of another session in any response");
  t.ok(c.seen.has(players.get(playerKey("iso-c1", "bob", "exp-1"))!.userId), "but bob's user id, as the author of a chat message of experience 1");
});

t.test("every other player: the same matrix", async (t) => {
  // The relation walk again for the mirror image of A (the other casino, user
  // and experience); for the six others, every root, lookup and hubCurrentX
  // (what a policy depending on who asks would get wrong) keeps the file fast.
  for (const key of players.keys()) {
    if (key === A) continue;
    report(t, await checkOnce(playerWho(key), { relations: key === MIRROR }));
  }
});

t.test("the operator reads every row through every query", async (t) => {
  report(t, await checkOnce(operator));
});

t.test("an unauthenticated request reads no hub or app row", async (t) => {
  report(t, await checkIdentity({ kind: "anon", label: "anonymous", headers: {} }));
  const bad = await checkIdentity({ kind: "anon", label: "unknown session", headers: { authorization: "session:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" } });
  report(t, bad);
  // Credentials that existed but no longer count: as anonymous. (Revoked before
  // their first use, so no cached identity is involved.)
  const revokedSession = await makePlayer(hub.superuserDatabaseUrl, "alice", { casinoName: "iso-c1", experienceName: "exp-1" });
  await db.query("update hub.session set revoked_at = now() where id = $1", [revokedSession.sessionId]);
  const expiredSession = await makePlayer(hub.superuserDatabaseUrl, "alice", { casinoName: "iso-c1", experienceName: "exp-1", expiresInSeconds: 0.001 });
  const revokedKey = await makeOperator(hub.superuserDatabaseUrl);
  await db.query("update hub.api_key set revoked_at = now() where id = $1", [revokedKey.id]);
  await new Promise((resolve) => setTimeout(resolve, 20)); // let the expiry pass (not an assertion)
  await loadUniverse();
  for (const [label, headers] of [
    ["revoked session of A", revokedSession.header],
    ["expired session of A", expiredSession.header],
    ["revoked API key", revokedKey.header],
  ] as const) {
    report(t, await checkIdentity({ kind: "anon", label, headers }));
  }
});

t.test("identities interleaved at once: no row of one request reaches another (pooled connections, caches)", async (t) => {
  // The same query texts, sent concurrently by every identity: request settings
  // left on a pooled connection, or a plan or identity cached across requests,
  // would hand one identity another's rows.
  const whos: Who[] = [...players.keys()].map((k) => playerWho(k));
  whos.push(operator, { kind: "anon", label: "anonymous", headers: {} });
  const docs = [
    `{ ${model.rootConnections.map((r) => `${r.field} { totalCount nodes { ${selectionOf(model, r.type, 0)} } }`).join(" ")} }`,
    `{ ${model.currents.map((r) => `${r.field} { ${selectionOf(model, r.type, 0)} }`).join(" ")} }`,
  ];
  const rounds = 8;
  const checkers = new Map(whos.map((who) => [who.label, { who, violations: [], queries: 0, rowsCompared: 0, seen: new Set<string>() } as Checker]));
  const jobs: (() => Promise<void>)[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const who of whos) {
      const c = checkers.get(who.label)!;
      jobs.push(async () => {
        const mine = await run(c, docs[0]!);
        c.queries += model.rootConnections.length;
        if (mine) for (const r of model.rootConnections) compareConnection(c, r.type, mine[r.field], { nodes: universe.get(r.type)! }, r.field);
      });
      jobs.push(async () => {
        const mine = await run(c, docs[1]!);
        c.queries += model.currents.length;
        if (!mine) return;
        for (const r of model.currents) {
          const expectedId = who.kind === "player" ? who.current.get(r.type) : undefined;
          const got = mine[r.field] as Row | null;
          c.rowsCompared++;
          if ((got?.id ?? undefined) !== expectedId) c.violations.push(`CURRENT as ${who.label}: ${r.field} is ${JSON.stringify(got?.id ?? null)}, expected ${JSON.stringify(expectedId ?? null)}`);
        }
      });
    }
  }
  // Shuffled so neighbouring requests belong to different identities.
  for (let i = jobs.length - 1; i > 0; i--) {
    const j = (i * 7919 + 13) % (i + 1);
    [jobs[i], jobs[j]] = [jobs[j]!, jobs[i]!];
  }
  await Promise.all(jobs.map((job) => job()));
  for (const c of checkers.values()) report(t, c);
});

// The original's two operator updates, written by hand: operators only, amounts through the ledger (test/original-surface.test.ts).
const ORIGINAL_UPDATES = new Set(["updateHubBankrollById", "updateHubCasinoById", "type HubBankrollPatch", "type HubCasinoPatch", "type UpdateHubBankrollPayload", "type UpdateHubCasinoPayload"]);

t.test("no generated create/update/delete mutation for any table", async (t) => {
  const mutation = model.mutationType ? model.types.get(model.mutationType)! : undefined;
  const names = (mutation?.fields ?? []).map((f) => f.name).filter((n) => !ORIGINAL_UPDATES.has(n));
  const crud: string[] = [];
  for (const type of model.tables.keys()) {
    for (const name of names) if (new RegExp(`^(create|update|delete|upsert)${type}(By|$)`).test(name)) crud.push(name);
    for (const suffix of ["Patch", "Input"]) if (model.types.has(`${type}${suffix}`)) crud.push(`type ${type}${suffix}`);
    for (const verb of ["Create", "Update", "Delete", "Upsert"]) if (model.types.has(`${verb}${type}Payload`)) crud.push(`type ${verb}${type}Payload`);
  }
  t.same(crud.filter((n) => !ORIGINAL_UPDATES.has(n)), [], `no CRUD mutation or input type for the ${model.tables.size} table types`);
  t.same(names.filter((n) => /^(create|update|delete|upsert)[A-Z]/.test(n)), [], "no mutation named create*/update*/delete*/upsert*");
  t.comment(`mutations: ${names.join(", ")}`);
  t.ok(names.length > 0, "the mutation type was read");
});

t.test("credential digests are not queryable", async (t) => {
  // HubHash.digest is a provably fair game's revealed hash, public by design, not a credential.
  const published = /^HubHash(Condition|OrderBy)?\.(digest|DIGEST_(ASC|DESC))$/;
  const mentions: string[] = [];
  for (const type of model.types.values()) {
    if (type.name.startsWith("__")) continue;
    if (/digest/i.test(type.name)) mentions.push(type.name);
    for (const f of type.fields ?? []) {
      if (/digest/i.test(f.name)) mentions.push(`${type.name}.${f.name}`);
      for (const a of f.args) if (/digest/i.test(a.name)) mentions.push(`${type.name}.${f.name}(${a.name})`);
    }
    for (const f of type.inputFields ?? []) if (/digest/i.test(f.name)) mentions.push(`${type.name}.${f.name}`);
    for (const v of type.enumValues ?? []) if (/digest/i.test(v.name)) mentions.push(`${type.name}.${v.name}`);
  }
  t.same(mentions.filter((m) => !published.test(m)), [], "no type, field, argument, input field or enum value mentions a digest (but HubHash's)");
  for (const [query, field] of [
    ["{ allHubSessions { nodes { tokenDigest } } }", "tokenDigest"],
    ["{ allHubApiKeys { nodes { keyDigest } } }", "keyDigest"],
    ['{ allHubSessions(condition: { tokenDigest: "\\\\x00" }) { totalCount } }', "tokenDigest"],
    ['{ hubSessionByTokenDigest(tokenDigest: "x") { id } }', "hubSessionByTokenDigest"],
    ['{ hubApiKeyByKeyDigest(keyDigest: "x") { id } }', "hubApiKeyByKeyDigest"],
  ] as const) {
    const res = await injectGql(hub, query, {}, operator.headers);
    t.equal(res.body.data ?? undefined, undefined, `${query}: no data`);
    t.match(res.body.errors?.[0]?.message ?? "", new RegExp(field), `${query}: refused at validation, naming ${field}`);
  }
  // Underneath GraphQL: the role of every request cannot read the columns at all.
  const client = await db.connect();
  try {
    for (const [table, column] of [["hub.session", "token_digest"], ["hub.api_key", "key_digest"]] as const) {
      await client.query("begin");
      await client.query("set local role app_postgraphile");
      await client.query("select set_config('operator.api_key', 'x', true)");
      const error = await client.query(`select ${column} from ${table}`).then(() => undefined, (e: { code?: string }) => e);
      await client.query("rollback");
      t.equal(error?.code, "42501", `app_postgraphile (even as operator): select ${column} from ${table} is permission denied`);
    }
  } finally {
    client.release();
  }
});

t.test("summary", async (t) => {
  t.ok(totalQueries > 1000, `${totalQueries} queries checked in all`);
  t.comment(`tenant isolation: ${totalQueries} queries checked`);
});
