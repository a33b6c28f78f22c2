/**
 * TowerPlugin: a provably fair tower climb, the reference for a multi-step
 * custom game built on the player's hash chain.
 *
 * A climb starts with a wager (taken from the balance at once). Each floor
 * has three tiles, one hiding a trap; the player steps on a tile per move. The
 * trap's tile is drawn by the chain's next hash and the player's client seed,
 * so neither side chooses it alone and the player checks every floor once the
 * chain is revealed. Stepping on the trap loses the wager; after each safe
 * floor the player may cash out (wager × 0.99 × 1.5^floors, rounded down), and
 * clearing the top floor cashes out by itself.
 *
 * Whatever floor a player decides to stop at, each floor is survived with
 * probability 2/3 and multiplies the payout by 3/2, so every way of playing
 * returns 99% of the wager on average: the house keeps 1% (plus the rounding).
 *
 * Locks, in the order every hub game takes them so concurrent games and bets
 * cannot deadlock: the hash chain, then the game row, then the player's
 * balance, then the house bankroll.
 */
import { extendSchema, gql } from "@hubpkg/hub/graphile";
import { clientError, ErrorCode, GraphQLError } from "@hubpkg/hub/graphql";
import { access, context, lambda, sideEffect } from "@hubpkg/hub/grafast";
import { dbClaimIdempotencyKey, dbRecordIdempotentResult, dbSettleBet, withPgPoolTransaction, type Pool, type PoolClient } from "@hubpkg/hub/db";
import {
  dbInsertHubHash,
  dbLockHubHashChain,
  dbNextHubHashChainIteration,
  getIntermediateHash,
  makeFinalHash,
  normalizeHash,
  validateRisk,
  type ChainSecrets,
  type RiskLimits,
  type RiskPolicy,
} from "@hubpkg/hub/hash-chain";

export interface TowerPluginOptions {
  /** Floors of the tower, 1 to 20: clearing the last one cashes out by itself. */
  maxFloor: number;
  /** How much one climb may pay at most (its top-floor payout), given the bankroll. Default: the whole bankroll. */
  riskPolicy?: RiskPolicy;
}

/** Tiles per floor; one of them hides the trap. */
export const TOWER_TILES = 3;
/** The most floors a tower may have (the top multiplier is then 0.99 × 1.5^20 ≈ 3,292). */
export const TOWER_MAX_FLOORS = 20;
/** What the house keeps on average, in percent of the wager. */
const HOUSE_EDGE_PERCENT = 1n;
const MAX_CLIENT_SEED_LENGTH = 32;
const CONTROL_CHARACTERS = /\p{Cc}/u;

/**
 * What cashing out after `floors` cleared floors pays, wager included:
 * floor(wager × 0.99 × (3/2)^floors), computed exactly in integers so no
 * float rounding can pay a unit too much or too little.
 */
export function towerPayout(wager: number, floors: number): number {
  const numerator = BigInt(wager) * (100n - HOUSE_EDGE_PERCENT) * 3n ** BigInt(floors);
  const denominator = 100n * 2n ** BigInt(floors);
  return Number(numerator / denominator);
}

/**
 * The tile (0, 1 or 2) under which a floor's trap lies, from the chain's hash
 * and the client seed: floor(normalizeHash(HMAC-SHA256(hash, clientSeed)) × 3).
 * It is the outcome index the shipped verifier (verifyOutcomeBet) computes for
 * three outcomes of equal weight.
 */
export function towerTrapTile(serverHash: Uint8Array, clientSeed: string): number {
  return Math.floor(normalizeHash(makeFinalHash({ serverHash, clientSeed })) * TOWER_TILES);
}

interface DbTowerGame {
  id: string;
  wager: number;
  currency_key: string;
  status: "ACTIVE" | "CASHED_OUT" | "BUSTED";
  floor: number;
  max_floor: number;
}

type Player = { userId: string; casinoId: string; experienceId: string };
type StartResult = { __typename: "StartTowerSuccess"; gameId: string; balance: number } | { __typename: "HubRiskError"; gameId?: undefined; message: string; riskLimits: RiskLimits };
type MoveResult =
  | { __typename: "MoveTowerSuccess"; gameId: string; moveId: string; survived: boolean; balance: number | null }
  | { __typename: "HubBadHashChainError"; gameId?: undefined; message: string };

const refuse = (field: string, message: string, code: ErrorCode = ErrorCode.BAD_USER_INPUT) => clientError(code, `${field}: ${message}`);

function requirePlayer(identity: any): Player {
  // A player's game: no credential is UNAUTHENTICATED, an operator's key FORBIDDEN.
  if (identity?.kind !== "user") throw clientError(identity ? ErrorCode.FORBIDDEN : ErrorCode.UNAUTHENTICATED, "Unauthorized: the tower game needs a player's session.");
  const { user_id: userId, casino_id: casinoId, experience_id: experienceId } = identity.session;
  return { userId, casinoId, experienceId };
}

/** The player's game, locked until the transaction ends; refused when it is not theirs or is over. */
async function lockActiveGame(pgClient: PoolClient, field: string, player: Player, gameId: string): Promise<DbTowerGame> {
  const { rows } = await pgClient.query<DbTowerGame>(
    `select id, wager, currency_key, status, floor, max_floor from app.tower_game
      where id = $1 and user_id = $2 and casino_id = $3 and experience_id = $4
      for update`,
    [gameId, player.userId, player.casinoId, player.experienceId],
  );
  const game = rows[0];
  if (!game) throw refuse(field, `no tower game ${gameId} of this player in this casino and experience.`);
  if (game.status !== "ACTIVE") throw refuse(field, `tower game ${gameId} is over (${game.status}); start a new one with startTower.`);
  return game;
}

/**
 * Pay the game's current payout from the bankroll to the balance and close it;
 * or, when it cannot be paid now, the refusal (nothing written, the game
 * stays open). The game row must be locked; takes the balance and bankroll
 * locks after it.
 */
async function cashOut(pgClient: PoolClient, field: string, player: Player, game: DbTowerGame, floors: number): Promise<{ balance: number } | { refusal: Error }> {
  const payout = towerPayout(game.wager, floors);
  let balance: number;
  try {
    // Only if the operator drained the bankroll since the start is this refused.
    ({ balance } = await dbSettleBet(pgClient, {
      ...player, currencyKey: game.currency_key, kind: "tower", betId: game.id, wager: 0, payout, actor: `plugin:${field}`, reason: "tower payout", field,
    }));
  } catch (error) {
    // A refusal writes nothing: the game stays active, to cash out later.
    if (!(error instanceof GraphQLError)) throw error;
    if (error.extensions.code === ErrorCode.INSUFFICIENT_FUNDS && error.extensions.account === "house") {
      return { refusal: refuse(field, `the house bankroll cannot pay ${payout} ${game.currency_key} now; the game stays active, cash out later.`, ErrorCode.INSUFFICIENT_FUNDS) };
    }
    return { refusal: error };
  }
  await pgClient.query(
    "update app.tower_game set status = 'CASHED_OUT', floor = $2, payout = $3, net = $3 - wager, finished_at = now() where id = $1",
    [game.id, floors, payout],
  );
  return { balance };
}

function checkOptions(options: TowerPluginOptions): void {
  const { maxFloor, riskPolicy } = options ?? ({} as TowerPluginOptions);
  if (!Number.isSafeInteger(maxFloor) || maxFloor < 1 || maxFloor > TOWER_MAX_FLOORS) {
    throw new TypeError(`TowerPlugin: maxFloor must be a whole number from 1 to ${TOWER_MAX_FLOORS}; received ${String(maxFloor)}.`);
  }
  if (riskPolicy !== undefined && typeof riskPolicy !== "function") {
    throw new TypeError(`TowerPlugin: riskPolicy must be a function ({ bankroll, currency, … }) => ({ maxPayout }); received ${typeof riskPolicy}.`);
  }
}

const unionPlan = {
  planType($specifier: any) {
    return { $__typename: lambda($specifier, (r: any) => r.__typename as string, true), planForType: () => $specifier };
  },
};

/** Take the wager and open a climb, once the risk policy accepts its top floor's payout. */
async function startTower(options: TowerPluginOptions, pool: Pool, player: Player, input: { wager: number; currency: string; idempotencyKey?: string | null }): Promise<StartResult> {
  const field = "startTower";
  const { wager, currency } = input;
  if (!Number.isSafeInteger(wager) || wager < 1) {
    throw refuse(field, `the wager must be a whole number of base units of at least 1; received ${wager}.`, ErrorCode.INVALID_AMOUNT);
  }
  return idempotent(pool, player, field, input, (pgClient) => openClimb(options, pgClient, player, input));
}

/** A refusal answered as a value (HubRiskError, HubBadHashChainError): carried out of the transaction so it rolls back. */
class Refused<T> {
  constructor(readonly answer: T) {}
}

/**
 * Run a step of the game in one transaction under the client's idempotency
 * key: claimed first (before any lock or draw), so a retry answers what the
 * first request answered, stored with it, and changes nothing. A refusal
 * rolls the transaction back: it wrote nothing, and the key stays unused.
 */
async function idempotent<T extends { __typename?: string; gameId?: string }>(
  pool: Pool,
  player: Player,
  field: string,
  input: { idempotencyKey?: string | null },
  step: (pgClient: PoolClient) => Promise<T>,
): Promise<T> {
  const { idempotencyKey, ...request } = input;
  try {
    return await withPgPoolTransaction(pool, async (pgClient) => {
      const claim = { userId: player.userId, idempotencyKey, operation: field, request };
      const replay = await dbClaimIdempotencyKey(pgClient, claim);
      if (replay) return replay.result as T;
      const answer = await step(pgClient);
      if (answer.__typename === "HubRiskError" || answer.__typename === "HubBadHashChainError") throw new Refused(answer);
      // With or without a key: it also tells the hub that this request committed (OUTCOME_COMMITTED after it).
      await dbRecordIdempotentResult(pgClient, { ...claim, resultId: answer.gameId ?? null, result: answer });
      return answer;
    });
  } catch (error) {
    if (error instanceof Refused) return error.answer as T;
    throw error;
  }
}

async function openClimb(options: TowerPluginOptions, pgClient: PoolClient, player: Player, input: { wager: number; currency: string }): Promise<StartResult> {
  const field = "startTower";
  const { maxFloor, riskPolicy } = options;
  const { wager, currency } = input;
  // As last committed, unlocked, for the risk policy: dbSettleBet checks
  // the funds and the bankroll's cover again under its locks.
  const unit = (
    await pgClient.query<{ display_unit_name: string; display_unit_scale: number; bankroll: number | null; balance: number | null }>(
      `select c.display_unit_name, c.display_unit_scale, r.amount as bankroll, b.amount as balance
         from hub.currency c
         left join hub.bankroll r on r.casino_id = c.casino_id and r.currency_key = c.key
         left join hub.balance b on b.user_id = $3 and b.experience_id = $4 and b.currency_key = c.key and b.casino_id = c.casino_id
        where c.key = $1 and c.casino_id = $2`,
      [currency, player.casinoId, player.userId, player.experienceId],
    )
  ).rows[0];
  if (!unit) throw refuse(field, `unknown currency ${JSON.stringify(currency)}; the casino of this session has no such currency.`, ErrorCode.UNKNOWN_CURRENCY);
  if (unit.bankroll === null) throw refuse(field, `the house has no bankroll in ${currency}.`, ErrorCode.UNKNOWN_CURRENCY);
  if (unit.balance === null || unit.balance < wager) {
    throw refuse(field, `the wager is ${wager} ${currency} but the balance is ${unit.balance ?? 0} ${currency}.`, ErrorCode.INSUFFICIENT_FUNDS);
  }
  // The whole climb is checked now: the top floor's payout is the most it can pay.
  const maxPotentialPayout = towerPayout(wager, maxFloor);
  const risk = validateRisk({
    type: "validate-bet",
    currency,
    wager,
    bankroll: unit.bankroll,
    riskLimits: riskPolicy ?? (({ bankroll }) => ({ maxPayout: bankroll })),
    maxPotentialPayout,
    displayUnitName: unit.display_unit_name,
    displayUnitScale: unit.display_unit_scale,
  });
  if (!risk.ok) return { __typename: "HubRiskError", message: risk.error.message, riskLimits: risk.error.riskLimits };

  // Every way of playing pays back 99% of the wager on average: the
  // house's expected gain is known at the start, whatever the player does next.
  const { betId: gameId, balance } = await dbSettleBet(pgClient, {
    ...player, currencyKey: currency, kind: "tower", wager, payout: 0, maxPayout: maxPotentialPayout,
    expectedValue: (wager * Number(HOUSE_EDGE_PERCENT)) / 100, actor: "plugin:startTower", reason: "tower wager", field,
  });
  await pgClient.query(
    `insert into app.tower_game (id, wager, net, currency_key, user_id, casino_id, experience_id, max_floor)
     values ($1, $2, -$2::float8, $3, $4, $5, $6, $7)`,
    [gameId, wager, currency, player.userId, player.casinoId, player.experienceId, maxFloor],
  );
  return { __typename: "StartTowerSuccess", gameId, balance };
}

/** One floor: the chain's next hash draws the trap; the top floor cashes out by itself. */
async function moveTower(pool: Pool, chains: ChainSecrets, player: Player, input: { gameId: string; tile: number; hashChainId: string; clientSeed: string; idempotencyKey?: string | null }): Promise<MoveResult> {
  const field = "moveTower";
  const { gameId, tile, hashChainId, clientSeed } = input;
  if (!Number.isInteger(tile) || tile < 0 || tile >= TOWER_TILES) {
    throw refuse(field, `the tile must be 0, 1 or 2 (left to right); received ${tile}.`);
  }
  // Counted in characters (code points), as hubMakeOutcomeBet counts them.
  const length = [...clientSeed].length;
  if (length > MAX_CLIENT_SEED_LENGTH || CONTROL_CHARACTERS.test(clientSeed)) {
    throw refuse(field, `the client seed must be at most ${MAX_CLIENT_SEED_LENGTH} characters without control characters; received ${length} characters${CONTROL_CHARACTERS.test(clientSeed) ? " with a control character" : ""}.`, ErrorCode.INVALID_CLIENT_SEED);
  }
  return idempotent(pool, player, field, input, async (pgClient) => {
    const chain = await dbLockHubHashChain(pgClient, { ...player, hashChainId, active: "must-be-active" });
    if (!chain) {
      return { __typename: "HubBadHashChainError", message: `Hash chain ${hashChainId} is not an active chain of this player in this casino and experience; create a new one (hubCreateHashChain) and retry.` };
    }
    const game = await lockActiveGame(pgClient, field, player, gameId);
    if (game.floor >= game.max_floor) {
      throw refuse(field, `tower game ${gameId} has cleared all its ${game.max_floor} floors; cash it out (cashOutTower).`);
    }
    const iteration = await dbNextHubHashChainIteration(pgClient, { hashChainId });
    if (iteration === null) {
      return { __typename: "HubBadHashChainError", message: `Hash chain ${hashChainId} is exhausted (all its ${chain.max_iteration - 1} hashes are used); create a new one (hubCreateHashChain) and retry.` };
    }
    const derived = await getIntermediateHash({ hashChainId, iteration, pgClient }, chains);
    if (derived.type === "error") throw new Error(`moveTower: cannot derive hash ${iteration} of chain ${hashChainId}: ${derived.reason}`);
    const trapTile = towerTrapTile(derived.hash, clientSeed);
    const floor = game.floor + 1;
    const hash = await dbInsertHubHash(pgClient, {
      hashChainId,
      kind: "INTERMEDIATE",
      digest: derived.hash,
      iteration,
      clientSeed,
      metadata: { game: "TOWER", gameId, floor, tile, trapTile },
    });
    const move = await pgClient.query<{ id: string }>(
      `insert into app.tower_move (game_id, floor, tile, trap_tile, hash_id, user_id, casino_id, experience_id)
       values ($1, $2, $3, $4, $5, $6, $7, $8) returning id`,
      [gameId, floor, tile, trapTile, hash.id, player.userId, player.casinoId, player.experienceId],
    );
    const moveId = move.rows[0]!.id;
    const survived = tile !== trapTile;
    let balance: number | null = null;
    if (!survived) {
      // The wager went to the bankroll at the start: nothing moves now.
      await pgClient.query("update app.tower_game set status = 'BUSTED', floor = $2 - 1, finished_at = now() where id = $1", [gameId, floor]);
    } else {
      await pgClient.query("update app.tower_game set floor = $2 where id = $1", [gameId, floor]);
      // The move stands whatever happens next: refusing it now would tell the
      // player this hash and seed are safe, to be replayed later.
      if (floor === game.max_floor) {
        const paid = await cashOut(pgClient, field, player, game, floor);
        if ("balance" in paid) balance = paid.balance;
      }
    }
    return { __typename: "MoveTowerSuccess", gameId, moveId, survived, balance };
  });
}

/** Pay the floors cleared so far and close the game. */
async function cashOutTower(pool: Pool, player: Player, input: { gameId: string; idempotencyKey?: string | null }): Promise<{ gameId: string; balance: number }> {
  const field = "cashOutTower";
  return idempotent(pool, player, field, input, async (pgClient) => {
    const game = await lockActiveGame(pgClient, field, player, input.gameId);
    if (game.floor < 1) throw refuse(field, `tower game ${game.id} has cleared no floor yet: climb at least one floor (moveTower) before cashing out.`);
    const paid = await cashOut(pgClient, field, player, game, game.floor);
    if ("refusal" in paid) throw paid.refusal;
    return { gameId: game.id, balance: paid.balance };
  });
}

/** The tower's types, inputs and fields. */
function towerTypeDefs() {
  return gql`
    type TowerRules {
      "Floors of the tower: clearing the last one cashes out by itself."
      maxFloor: Int!
      "Tiles per floor; one hides the trap."
      tiles: Int!
      "multipliers[k - 1]: what cashing out after k floors pays per unit wagered (the payout is wager × multiplier, rounded down)."
      multipliers: [Float!]!
    }
    input StartTowerInput {
      "Whole base units, at least 1 and at most the player's balance."
      wager: Int!
      "Key of a currency of the session's casino."
      currency: String!
      "Optional, 1 to 255 characters: a retry with the same key and input answers the first request and changes nothing (kept 24 hours)."
      idempotencyKey: String
    }
    type StartTowerPayload {
      result: StartTowerResult!
    }
    union StartTowerResult = StartTowerSuccess | HubRiskError
    type StartTowerSuccess {
      game: TowerGame!
      "The player's balance after the wager was taken."
      balance: Float!
    }
    input MoveTowerInput {
      gameId: UUID!
      "The tile stepped on: 0, 1 or 2."
      tile: Int!
      "The player's active hash chain: its next hash draws this floor's trap."
      hashChainId: UUID!
      "At most 32 characters, no control characters."
      clientSeed: String!
      "Optional, 1 to 255 characters: a retry with the same key and input answers the first request and changes nothing (kept 24 hours)."
      idempotencyKey: String
    }
    type MoveTowerPayload {
      result: MoveTowerResult!
    }
    union MoveTowerResult = MoveTowerSuccess | HubBadHashChainError
    type MoveTowerSuccess {
      game: TowerGame!
      move: TowerMove!
      "False when the tile hid the trap: the game is BUSTED."
      survived: Boolean!
      "The balance after the payout when this move cleared the top floor and the game cashed out by itself; null otherwise."
      balance: Float
    }
    input CashOutTowerInput {
      gameId: UUID!
      "Optional, 1 to 255 characters: a retry with the same key and input answers the first request and changes nothing (kept 24 hours)."
      idempotencyKey: String
    }
    type CashOutTowerPayload {
      game: TowerGame!
      "The player's balance after the payout."
      balance: Float!
    }
    extend type Query {
      "The rules of this hub's tower: floors, tiles and the payout multiplier of each floor."
      towerRules: TowerRules!
    }
    extend type Mutation {
      "Start a climb: the wager leaves the balance now. Refused with HubRiskError when the top floor's payout exceeds the risk policy. Needs a player's session."
      startTower(input: StartTowerInput!): StartTowerPayload
      "Step on a tile of the next floor; the chain's next hash and the client seed decide where the trap is."
      moveTower(input: MoveTowerInput!): MoveTowerPayload
      "Take the payout of the floors cleared so far (at least one)."
      cashOutTower(input: CashOutTowerInput!): CashOutTowerPayload
    }
  `;
}

/** The plans of the tower's fields: each mutation runs its handler as a side effect; the games and moves read back under the player's row-level security. */
function towerObjects(options: TowerPluginOptions, gameResource: any, moveResource: any) {
  const multipliers = Array.from({ length: options.maxFloor }, (_, i) => (0.99 * 1.5 ** (i + 1)));
  return {
    Query: {
      plans: {
        towerRules: () => lambda(null, () => ({ maxFloor: options.maxFloor, tiles: TOWER_TILES, multipliers }), true),
      },
    },
    Mutation: {
      plans: {
        startTower(_parent: any, fieldArgs: any) {
          const $input = fieldArgs.getRaw("input");
          return sideEffect([$input, context().get("identity"), context().get("superuserPool")], ([input, identity, pool]) =>
            startTower(options, pool as Pool, requirePlayer(identity), input as { wager: number; currency: string; idempotencyKey?: string | null }),
          );
        },
        moveTower(_parent: any, fieldArgs: any) {
          const $input = fieldArgs.getRaw("input");
          // The server's own chain work derives the hash (its cache of the chain's segments).
          return sideEffect([$input, context().get("identity"), context().get("superuserPool"), context().get("hashChains")], ([input, identity, pool, chains]) =>
            moveTower(pool as Pool, chains as ChainSecrets, requirePlayer(identity), input as { gameId: string; tile: number; hashChainId: string; clientSeed: string; idempotencyKey?: string | null }),
          );
        },
        cashOutTower(_parent: any, fieldArgs: any) {
          const $input = fieldArgs.getRaw("input");
          return sideEffect([$input, context().get("identity"), context().get("superuserPool")], ([input, identity, pool]) =>
            cashOutTower(pool as Pool, requirePlayer(identity), input as { gameId: string; idempotencyKey?: string | null }),
          );
        },
      },
    },
    StartTowerPayload: { plans: { result: ($payload: any) => $payload } },
    MoveTowerPayload: { plans: { result: ($payload: any) => $payload } },
    // Read back through the generated types, under the player's row-level security.
    StartTowerSuccess: { plans: { game: ($r: any) => gameResource.get({ id: access($r, "gameId") }), balance: ($r: any) => access($r, "balance") } },
    MoveTowerSuccess: {
      plans: {
        game: ($r: any) => gameResource.get({ id: access($r, "gameId") }),
        move: ($r: any) => moveResource.get({ id: access($r, "moveId") }),
        survived: ($r: any) => access($r, "survived"),
        balance: ($r: any) => access($r, "balance"),
      },
    },
    CashOutTowerPayload: { plans: { game: ($r: any) => gameResource.get({ id: access($r, "gameId") }), balance: ($r: any) => access($r, "balance") } },
  };
}

/**
 * The tower game. Needs the reference migrations (app.tower_game,
 * app.tower_move), extraPgSchemas: ["app"], and HubGameConfigPlugin (which
 * defines HubRiskError and HubBadHashChainError).
 */
export function TowerPlugin(options: TowerPluginOptions): GraphileConfig.Plugin {
  checkOptions(options);
  return extendSchema((build) => {
    const { tower_game: gameResource, tower_move: moveResource } = build.input.pgRegistry.pgResources;
    if (!gameResource || !moveResource) {
      throw new Error('TowerPlugin: the tables app.tower_game and app.tower_move are not in the schema; apply the reference migrations (userDatabaseMigrationsPath: referenceMigrationsPath) and pass extraPgSchemas: ["app"].');
    }
    return {
      typeDefs: towerTypeDefs(),
      objects: towerObjects(options, gameResource, moveResource),
      unions: { StartTowerResult: unionPlan, MoveTowerResult: unionPlan },
    } as any;
  }, "TowerPlugin");
}
