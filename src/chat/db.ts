import type pg from "pg";
import { withPgPoolTransaction } from "../db/pools.js";
import { ErrorCode } from "../errors.js";
import { clientError } from "../graphql/client-error.js";
import { queryFile } from "../db/query-files.js";

const CHAT_MUTE = queryFile("chat-mute");

/** The longest message, in characters (Unicode code points); hub.chat_message checks it too. */
export const CHAT_MAX_BODY_LENGTH = 500;
/** The longest mute reason, in characters. */
export const CHAT_MAX_REASON_LENGTH = 500;
/** A player posts at most `posts` messages per experience in each fixed window of `windowSeconds`. */
export const CHAT_RATE_LIMIT = { posts: 5, windowSeconds: 10 } as const;

// Every control character (C0, DEL, C1) and every Unicode line or paragraph
// separator (U+2028, U+2029, categories Zl and Zp, which are not controls):
// a chat line is one line of text however the reader breaks lines.
export const CHAT_LINE_BREAKING = /[\p{Cc}\p{Zl}\p{Zp}]/u;

/** Refuse a body the chat does not store; the text is otherwise kept exactly as sent. */
export function checkChatBody(body: unknown, field: string): string {
  if (typeof body !== "string" || body.trim() === "") {
    throw clientError(ErrorCode.CHAT_BODY_EMPTY, `${field}: body must hold some text other than spaces; received ${JSON.stringify(body)}.`);
  }
  const length = [...body].length;
  if (length > CHAT_MAX_BODY_LENGTH) {
    throw clientError(ErrorCode.CHAT_BODY_TOO_LONG, `${field}: body may have at most ${CHAT_MAX_BODY_LENGTH} characters; received ${length}.`, {
      limit: CHAT_MAX_BODY_LENGTH,
    });
  }
  const control = CHAT_LINE_BREAKING.exec(body);
  if (control) {
    const code = control[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0");
    throw clientError(ErrorCode.CHAT_BODY_CONTROL_CHARACTER, `${field}: body must be one line, without control characters or line and paragraph separators (U+2028, U+2029); received U+${code} at index ${control.index}.`);
  }
  return body;
}

export interface ChatPlayer {
  user_id: string;
  casino_id: string;
  experience_id: string;
}

export type CreateUserMessageResult =
  | { __typename: "HubChatCreateUserMessageSuccess"; chatMessageId: string }
  | { __typename: "HubChatUserMuted"; message: string }
  | { __typename: "HubChatUserRateLimited"; message: string };

const ACTIVE_MUTE = "revoked_at is null and (expired_at is null or expired_at > now())";

/**
 * A player's post to their experience's chat. The same client id again
 * answers the stored message (nothing new is stored or announced); a muted or
 * rate-limited player's post stores nothing.
 */
export async function dbCreateUserMessage(pool: pg.Pool, player: ChatPlayer, body: string, clientId: string): Promise<CreateUserMessageResult> {
  return withPgPoolTransaction(pool, async (c) => {
    const existing = await c.query<{ id: string; experience_id: string; hidden_at: Date | null }>(
      "select id, experience_id, hidden_at from hub.chat_message where type = 'user' and user_id = $1 and client_id = $2",
      [player.user_id, clientId],
    );
    const stored = existing.rows[0];
    if (stored) return repost(stored, player, clientId);
    const mute = await c.query<{ expired_at: Date | null; reason: string | null }>(
      `select expired_at, reason from hub.chat_mute where user_id = $1 and experience_id = $2 and ${ACTIVE_MUTE} order by id desc limit 1`,
      [player.user_id, player.experience_id],
    );
    if (mute.rows[0]) {
      const { expired_at, reason } = mute.rows[0];
      const until = expired_at ? `until ${expired_at.toISOString()}` : "until a moderator unmutes you";
      return { __typename: "HubChatUserMuted", message: `You are muted in this chat ${until}${reason ? `: ${reason}` : ""}.` };
    }
    // The bucket row is per player: one player's posts never wait on another's.
    const bucket = await c.query<{ posts: number; window_start: Date }>(
      `insert into hub_hidden.chat_rate_bucket as b (user_id, experience_id, window_start, posts) values ($1, $2, now(), 1)
       on conflict (user_id, experience_id) do update
          set window_start = case when b.window_start <= now() - make_interval(secs => $3) then now() else b.window_start end,
              posts = case when b.window_start <= now() - make_interval(secs => $3) then 1 else b.posts + 1 end
       returning posts, window_start`,
      [player.user_id, player.experience_id, CHAT_RATE_LIMIT.windowSeconds],
    );
    const { posts, window_start } = bucket.rows[0]!;
    if (posts > CHAT_RATE_LIMIT.posts) {
      const retryAt = new Date(window_start.getTime() + CHAT_RATE_LIMIT.windowSeconds * 1000);
      return {
        __typename: "HubChatUserRateLimited",
        message: `At most ${CHAT_RATE_LIMIT.posts} messages every ${CHAT_RATE_LIMIT.windowSeconds} seconds; post again after ${retryAt.toISOString()}.`,
      };
    }
    const inserted = await c.query<{ id: string }>(
      `insert into hub.chat_message (casino_id, experience_id, user_id, type, client_id, body) values ($1, $2, $3, 'user', $4, $5)
       on conflict (user_id, client_id) where type = 'user' do nothing returning id`,
      [player.casino_id, player.experience_id, player.user_id, clientId, body],
    );
    // A concurrent post with the same client id won the race: answer its message.
    const id = inserted.rows[0]?.id ?? (await c.query<{ id: string }>("select id from hub.chat_message where type = 'user' and user_id = $1 and client_id = $2", [player.user_id, clientId])).rows[0]!.id;
    return { __typename: "HubChatCreateUserMessageSuccess", chatMessageId: id };
  });
}

/** The answer to a post whose client id is already stored: that message, when the player may still read it. */
function repost(stored: { id: string; experience_id: string; hidden_at: Date | null }, player: ChatPlayer, clientId: string): CreateUserMessageResult {
  if (stored.experience_id !== player.experience_id) {
    throw clientError(ErrorCode.BAD_USER_INPUT, `hubChatCreateUserMessage: clientId ${clientId} was already used for a message in another experience; send a new clientId.`);
  }
  if (stored.hidden_at) {
    throw clientError(ErrorCode.BAD_USER_INPUT, `hubChatCreateUserMessage: clientId ${clientId} was already used for a message an operator has hidden; send a new clientId.`);
  }
  return { __typename: "HubChatCreateUserMessageSuccess", chatMessageId: stored.id };
}

async function experienceCasino(db: pg.Pool | pg.PoolClient, experienceId: string, field: string): Promise<string> {
  const { rows } = await db.query<{ casino_id: string }>("select casino_id from hub.experience where id = $1", [experienceId]);
  if (!rows[0]) throw clientError(ErrorCode.CHAT_NOT_FOUND, `${field}: no experience has the id ${experienceId}.`);
  return rows[0].casino_id;
}

/** An operator's message to an experience's chat; idempotent by (experience, client id). */
export async function dbCreateSystemMessage(pool: pg.Pool, experienceId: string, body: string, clientId: string): Promise<string> {
  const casinoId = await experienceCasino(pool, experienceId, "hubChatCreateSystemMessage");
  const { rows } = await pool.query<{ id: string }>(
    `with inserted as (
       insert into hub.chat_message (casino_id, experience_id, type, client_id, body) values ($1, $2, 'system', $3, $4)
       on conflict (experience_id, client_id) where type = 'system' do nothing returning id)
     select id from inserted
     union all
     select id from hub.chat_message where type = 'system' and experience_id = $2 and client_id = $3`,
    [casinoId, experienceId, clientId, body],
  );
  if (rows[0]) return rows[0].id;
  // Inserted concurrently by another request after this statement's snapshot.
  return (await pool.query<{ id: string }>("select id from hub.chat_message where type = 'system' and experience_id = $1 and client_id = $2", [experienceId, clientId])).rows[0]!.id;
}

/** Who moderates: an operator (every experience of the player's casino) or a mod of one experience. */
export type ChatModerator = { kind: "operator"; actor: string } | { kind: "mod"; actor: string; player: ChatPlayer };

async function targetCasino(c: pg.PoolClient, userId: string, field: string): Promise<string> {
  const { rows } = await c.query<{ casino_id: string }>("select casino_id from hub.user where id = $1", [userId]);
  if (!rows[0]) throw clientError(ErrorCode.CHAT_NOT_FOUND, `${field}: no player has the id ${userId}.`);
  return rows[0].casino_id;
}

/** The experiences a moderation acts in: the mod's own, or every one of the player's casino for an operator. */
async function moderatedExperiences(c: pg.PoolClient, who: ChatModerator, userId: string, field: string): Promise<{ casinoId: string; experienceIds: string[] }> {
  const casinoId = await targetCasino(c, userId, field);
  if (who.kind === "mod") {
    if (casinoId !== who.player.casino_id) throw clientError(ErrorCode.CHAT_NOT_FOUND, `${field}: no player has the id ${userId} in this casino.`);
    return { casinoId, experienceIds: [who.player.experience_id] };
  }
  const { rows } = await c.query<{ id: string }>("select id from hub.experience where casino_id = $1 order by id", [casinoId]);
  return { casinoId, experienceIds: rows.map((r) => r.id) };
}

/** The one row of several to answer with: the player's latest session's experience first. */
async function preferredRow(c: pg.PoolClient, userId: string, rows: { id: string; experience_id: string }[]): Promise<string> {
  if (rows.length === 1) return rows[0]!.id;
  const { rows: s } = await c.query<{ experience_id: string }>("select experience_id from hub.session where user_id = $1 order by id desc limit 1", [userId]);
  return (rows.find((r) => r.experience_id === s[0]?.experience_id) ?? rows[0]!).id;
}

export interface MuteInput {
  userId: string;
  expiredAt: Date | null;
  reason: string | null;
}

/**
 * Moderation holds: a mod never lifts or changes a mute of their own, nor one
 * an operator made (an operator outranks a mod); mods lift and change each
 * other's mutes of other players. Operators may do anything. Reads the mutes
 * in force with FOR UPDATE, so a mute that changes hands meanwhile is judged
 * as it then stands.
 */
async function checkStanding(c: pg.PoolClient, who: ChatModerator, userId: string, experienceIds: string[], field: string): Promise<void> {
  if (who.kind !== "mod") return;
  const { rows } = await c.query<{ muted_by: string }>(
    `select muted_by from hub.chat_mute where user_id = $1 and experience_id = any($2::uuid[]) and ${ACTIVE_MUTE} for update`,
    [userId, experienceIds],
  );
  if (rows.length === 0) return;
  if (userId === who.player.user_id) {
    throw clientError(ErrorCode.CHAT_MODERATION_FORBIDDEN, `${field}: you are muted in this experience, and a mod cannot lift or change their own mute; an operator can.`);
  }
  if (rows.some((r) => !r.muted_by.startsWith("user:"))) {
    throw clientError(ErrorCode.CHAT_MODERATION_FORBIDDEN, `${field}: player ${userId} was muted here by an operator, whose mute a mod cannot lift or change; ask an operator.`);
  }
}

/** Mute a player (again: the mute in force takes the new expiry and reason). Answers the mute's id. */
export async function dbMuteUser(pool: pg.Pool, who: ChatModerator, input: MuteInput): Promise<string> {
  const field = "hubChatMuteUser";
  return withPgPoolTransaction(pool, async (c) => {
    const { casinoId, experienceIds } = await moderatedExperiences(c, who, input.userId, field);
    if (experienceIds.length === 0) throw clientError(ErrorCode.CHAT_NOT_FOUND, `${field}: the casino of player ${input.userId} has no experience to mute them in.`);
    await checkStanding(c, who, input.userId, experienceIds, field);
    const { rows } = await c.query<{ id: string; experience_id: string }>(CHAT_MUTE, [input.userId, experienceIds, input.expiredAt, input.reason, who.actor, casinoId]);
    return preferredRow(c, input.userId, rows);
  });
}

/** End the mutes in force of a player; refused when there is none. Answers one ended mute's id. */
export async function dbUnmuteUser(pool: pg.Pool, who: ChatModerator, userId: string): Promise<string> {
  const field = "hubChatUnmuteUser";
  return withPgPoolTransaction(pool, async (c) => {
    const { experienceIds } = await moderatedExperiences(c, who, userId, field);
    await checkStanding(c, who, userId, experienceIds, field);
    const { rows } = await c.query<{ id: string; experience_id: string }>(
      `update hub.chat_mute set revoked_at = now()
        where user_id = $1 and experience_id = any($2::uuid[]) and ${ACTIVE_MUTE} returning id, experience_id`,
      [userId, experienceIds],
    );
    if (rows.length === 0) throw clientError(ErrorCode.CHAT_NOT_MUTED, `${field}: player ${userId} is not muted${who.kind === "mod" ? " in this experience" : ""}.`);
    return preferredRow(c, userId, rows);
  });
}

/** Whether the player is a mod of their session's experience. */
export async function dbIsChatMod(pool: pg.Pool, player: ChatPlayer): Promise<boolean> {
  const { rows } = await pool.query("select 1 from hub.chat_mod where experience_id = $1 and user_id = $2", [player.experience_id, player.user_id]);
  return rows.length > 0;
}

/** A hub.chat_mod row, as its columns are named. */
export interface ChatModRow {
  id: string;
  casino_id: string;
  experience_id: string;
  user_id: string;
}

/** Make a player of the experience's casino a mod of it (again: the same row). */
export async function dbAddMod(pool: pg.Pool, experienceId: string, userId: string): Promise<ChatModRow> {
  const field = "hubChatAddMod";
  return withPgPoolTransaction(pool, async (c) => {
    const casinoId = await experienceCasino(c, experienceId, field);
    if ((await targetCasino(c, userId, field)) !== casinoId) {
      throw clientError(ErrorCode.CHAT_NOT_FOUND, `${field}: player ${userId} is not a player of the casino of experience ${experienceId}.`);
    }
    // One statement that answers the row whether it is new or was there (a read after "do nothing"
    // finds nothing when a removal commits in between).
    const { rows } = await c.query<ChatModRow>(
      `insert into hub.chat_mod (casino_id, experience_id, user_id) values ($1, $2, $3)
       on conflict (experience_id, user_id) do update set user_id = excluded.user_id
       returning id, casino_id, experience_id, user_id`,
      [casinoId, experienceId, userId],
    );
    return rows[0]!;
  });
}

/** Whether a mod was removed. */
export async function dbRemoveMod(pool: pg.Pool, experienceId: string, userId: string): Promise<boolean> {
  const { rowCount } = await pool.query("delete from hub.chat_mod where experience_id = $1 and user_id = $2", [experienceId, userId]);
  return (rowCount ?? 0) > 0;
}

/** Hide a message from players, or show it again; refused for an unknown id. */
export async function dbHideMessage(pool: pg.Pool, chatMessageId: string, hidden: boolean): Promise<string> {
  const { rows } = await pool.query<{ id: string }>(
    "update hub.chat_message set hidden_at = case when $2 then coalesce(hidden_at, now()) end where id = $1 returning id",
    [chatMessageId, hidden],
  );
  if (!rows[0]) throw clientError(ErrorCode.CHAT_NOT_FOUND, `hubChatHideMessage: no chat message has the id ${chatMessageId}.`);
  return rows[0].id;
}
