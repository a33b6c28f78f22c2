/**
 * What each command of `hub` does, once ./grammar.ts has checked its command
 * line: the result goes to stdout as its last line, messages to stderr.
 */
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type pg from "pg";
import { validatePublicKey } from "../../auth/casino-token.js";
import { HubError } from "../../errors.js";
import { createApiKey, createSession, digest, ensurePlayer, DEFAULT_EXPERIENCE, PLAYGROUND_CASINO } from "../../auth/credentials.js";
import { withPgPoolTransaction } from "../../db/pools.js";
import type { DbApiKey, DbBalance, DbCasino, DbExperience, DbUser } from "../../db/types.js";
import type { Runnable } from "./grammar.js";
import { listTransfers } from "../../transfers/cli.js";
import { initProject } from "../../scaffold/init.js";

/** A failure at run time that the message fully explains (exit 1, no SQLSTATE). */
export class CliFailure extends HubError {
  constructor(message: string) {
    super("HUB_CLI_FAILED", message);
  }
}

const say = (line: string) => process.stderr.write(`hub: ${line}\n`);
const result = (line: string) => process.stdout.write(`${line}\n`);
const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** Who the ledger records for changes made from the command line. */
function cliActor(): string {
  try {
    return `cli:${os.userInfo().username}`.slice(0, 200);
  } catch {
    return "cli";
  }
}

/** Columns padded to the widest cell, as `ps` or `docker ps` print them. */
function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [header, ...rows].map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  ")).join("\n");
}

async function apiKeyList(pool: pg.Pool, json: boolean): Promise<void> {
  const { rows } = await pool.query<DbApiKey>("select id, created_at, last_used_at, revoked_at from hub.api_key order by id");
  if (json) {
    result(JSON.stringify(rows.map((r) => ({ id: r.id, created_at: iso(r.created_at), last_used_at: iso(r.last_used_at), revoked_at: iso(r.revoked_at) }))));
  } else {
    result(table(["id", "created_at", "last_used_at", "revoked_at"], rows.map((r) => [r.id, iso(r.created_at)!, iso(r.last_used_at) ?? "-", iso(r.revoked_at) ?? "-"])));
  }
  const revoked = rows.filter((r) => r.revoked_at).length;
  say(`${rows.length} API key${rows.length === 1 ? "" : "s"}${revoked ? ` (${revoked} revoked)` : ""}.`);
}

async function apiKeyRevoke(pool: pg.Pool, id: string): Promise<void> {
  const { rows } = await pool.query<{ revoked_at: Date }>("update hub.api_key set revoked_at = now() where id = $1 and revoked_at is null returning revoked_at", [id]);
  if (rows[0]) {
    say(`revoked API key ${id}; requests sending it are refused within 1 s.`);
  } else {
    const found = await pool.query<{ revoked_at: Date }>("select revoked_at from hub.api_key where id = $1", [id]);
    if (!found.rows[0]) throw new CliFailure(`no API key has the id ${id} (hub api-key list shows them).`);
    say(`API key ${id} was already revoked at ${iso(found.rows[0].revoked_at)}; nothing changed.`);
  }
  result(id);
}

async function sessionRevoke(pool: pg.Pool, by: { id: string | undefined; token: string | undefined }): Promise<void> {
  const [column, value, what] = by.id !== undefined ? ["id", by.id, `id ${by.id}`] : ["token_digest", digest(by.token!), "this token"];
  const { rows } = await pool.query<{ id: string }>(
    `update hub.session set revoked_at = now() where ${column} = $1 and revoked_at is null returning id`,
    [value],
  );
  if (rows[0]) {
    say(`revoked session ${rows[0].id}; requests sending it are refused within 1 s.`);
    result(rows[0].id);
    return;
  }
  const found = await pool.query<{ id: string; revoked_at: Date }>(`select id, revoked_at from hub.session where ${column} = $1`, [value]);
  if (!found.rows[0]) {
    throw new CliFailure(
      by.id !== undefined ? `no session has the id ${by.id}.` : "no session has this token (only digests are stored: check it was copied whole).",
    );
  }
  say(`session ${found.rows[0].id} (${what}) was already revoked at ${iso(found.rows[0].revoked_at)}; nothing changed.`);
  result(found.rows[0].id);
}

async function casinoAdd(pool: pg.Pool, command: Extract<Runnable, { name: "casino add" }>): Promise<void> {
  const { casinoName: name, baseUrl } = command;
  let publicKey: string | undefined;
  if (command.publicKeyFile !== undefined) {
    try {
      publicKey = await fsp.readFile(command.publicKeyFile, "utf8");
    } catch (error) {
      throw new CliFailure(`cannot read --jwt-public-key-file ${JSON.stringify(command.publicKeyFile)}: ${(error as Error).message}`);
    }
    try {
      await validatePublicKey(publicKey);
    } catch (error) {
      throw new CliFailure(`--jwt-public-key-file ${JSON.stringify(command.publicKeyFile)} is not usable: ${(error as Error).message}.`);
    }
  }
  try {
    const casino = await withPgPoolTransaction(pool, async (client) => {
      const { rows } = await client.query<DbCasino>("insert into hub.casino (name, base_url) values ($1, $2) returning *", [name, baseUrl ?? null]);
      const row = rows[0]!;
      if (publicKey !== undefined || command.jwksUrl !== undefined) {
        await client.query(
          "insert into hub_secret.casino_auth (casino_id, public_key, jwks_url, issuer, audience) values ($1, $2, $3, $4, $5)",
          [row.id, publicKey ?? null, command.jwksUrl ?? null, command.issuer ?? null, command.audience ?? null],
        );
      }
      return row;
    });
    const auth = publicKey !== undefined ? ", verifying user tokens with the given public key" : command.jwksUrl ? `, verifying user tokens with ${command.jwksUrl}` : "";
    say(`added casino ${JSON.stringify(casino.name)} (${casino.id})${casino.base_url ? ` with base URL ${casino.base_url}` : ""}${auth}.`);
    result(casino.id);
  } catch (error) {
    const { code, constraint } = error as { code?: string; constraint?: string };
    if (code !== "23505") throw error;
    if (constraint === "casino_base_url_key") {
      const other = await pool.query<DbCasino>("select * from hub.casino where base_url = $1", [baseUrl]);
      throw new CliFailure(`the base URL ${baseUrl} is already the casino ${JSON.stringify(other.rows[0]?.name)}'s (${other.rows[0]?.id}); each casino has its own.`);
    }
    const other = await pool.query<DbCasino>("select * from hub.casino where name = $1", [name]);
    throw new CliFailure(`a casino named ${JSON.stringify(name)} already exists (${other.rows[0]?.id}).`);
  }
}

async function balanceCredit(pool: pg.Pool, command: Extract<Runnable, { name: "balance credit" }>): Promise<void> {
  const casinoName = command.casino ?? PLAYGROUND_CASINO;
  const experienceName = command.experience ?? DEFAULT_EXPERIENCE;
  const { casino, user, experience, balance, entryId } = await withPgPoolTransaction(pool, async (client) => {
    const casino = (await client.query<DbCasino>("select * from hub.casino where name = $1", [casinoName])).rows[0];
    if (!casino) throw new CliFailure(`no casino is named ${JSON.stringify(casinoName)} (hub casino add --name ${JSON.stringify(casinoName)} adds it).`);
    const user = (await client.query<DbUser>("select * from hub.user where casino_id = $1 and uname = $2", [casino.id, command.uname])).rows[0];
    if (!user) {
      throw new CliFailure(
        `casino ${JSON.stringify(casino.name)} has no player ${JSON.stringify(command.uname)}; players are created when they get a session (hub session create --uname ${JSON.stringify(command.uname)}${command.casino ? ` --casino ${JSON.stringify(casinoName)}` : ""}).`,
      );
    }
    const experience = (await client.query<DbExperience>("select * from hub.experience where casino_id = $1 and name = $2", [casino.id, experienceName])).rows[0];
    if (!experience) throw new CliFailure(`casino ${JSON.stringify(casino.name)} has no experience ${JSON.stringify(experienceName)}.`);
    const currencies = (await client.query<{ key: string }>("select key from hub.currency where casino_id = $1 order by key", [casino.id])).rows.map((r) => r.key);
    if (!currencies.includes(command.currency)) {
      throw new CliFailure(
        `casino ${JSON.stringify(casino.name)} has no currency ${JSON.stringify(command.currency)} (it has ${currencies.length ? currencies.map((c) => JSON.stringify(c)).join(", ") : "none"}).`,
      );
    }
    const { rows } = await client.query<DbBalance>("select * from hub_hidden.credit_balance($1, $2, $3, $4, $5, $6, $7)", [
      user.id, casino.id, experience.id, command.currency, command.amount, cliActor(), command.reason ?? "hub balance credit",
    ]);
    const entry = await client.query<{ id: string }>(
      "select id from hub.ledger where account = 'player' and user_id = $1 and experience_id = $2 and currency_key = $3 order by id desc limit 1",
      [user.id, experience.id, command.currency],
    );
    return { casino, user, experience, balance: rows[0]!, entryId: entry.rows[0]?.id };
  });
  say(
    `credited ${command.amount} ${command.currency} to ${JSON.stringify(user.uname)} (${user.id}) in casino ${JSON.stringify(casino.name)}, ` +
      `experience ${JSON.stringify(experience.name)}: the balance is now ${balance.amount} (ledger entry ${entryId}).`,
  );
  result(String(balance.amount));
}

async function transfersList(pool: pg.Pool, json: boolean): Promise<void> {
  const rows = await listTransfers(pool);
  if (json) {
    result(JSON.stringify(rows.map((r) => ({ ...r, next_attempt_at: iso(r.next_attempt_at), updated_at: iso(r.updated_at) }))));
  } else {
    result(
      table(
        ["id", "kind", "status", "casino", "subject", "amount", "attempts", "next_attempt_at", "last_error"],
        rows.map((r) => [
          r.id, r.kind, r.status, r.casino, r.subject ?? "-", r.amount === null ? "-" : `${r.amount} ${r.currency_key}`, String(r.attempts),
          r.status === "PENDING" ? iso(r.next_attempt_at)! : "-", (r.last_error ?? "-").replace(/\s+/g, " ").slice(0, 120),
        ]),
      ),
    );
  }
  const pending = rows.filter((r) => r.status === "PENDING" && r.kind !== "POLL").length;
  const failed = rows.filter((r) => r.status === "FAILED").length;
  say(`${pending} transfer item${pending === 1 ? "" : "s"} pending, ${failed} failed (casino polls not counted).`);
}

/** `hub init`: writes files only; no database. */
export function runInit(command: Extract<Runnable, { name: "init" }>): void {
  const { dir, hub, files } = initProject(command.dir, command.hub);
  say(`wrote ${files.length} files into ${dir}, depending on @hubpkg/hub ${hub}:\n  ${files.join("\n  ")}`);
  say(`next: cd ${JSON.stringify(path.relative(process.cwd(), dir) || ".")} && npm install && npm start`);
  result(dir);
}

/** The commands that work on the database. */
export async function run(command: Exclude<Runnable, { name: "init" | "db reset" }>, pool: pg.Pool): Promise<void> {
  switch (command.name) {
    case "api-key create": {
      const { key, id } = await createApiKey(pool);
      say(`created API key ${id}. It is shown once, on the next line; send it as "Authorization: apikey:<key>".`);
      result(key);
      return;
    }
    case "api-key list":
      return apiKeyList(pool, command.json);
    case "api-key revoke":
      return apiKeyRevoke(pool, command.id);
    case "session create": {
      const { casino, user, experience } = await ensurePlayer(pool, {
        uname: command.uname,
        casinoName: command.casino,
        experienceName: command.experience,
      });
      const { token, sessionId, expiredAt } = await createSession(pool, { userId: user.id, casinoId: casino.id, experienceId: experience.id });
      say(
        `created session ${sessionId} for user ${JSON.stringify(user.uname)} (${user.id}) in casino ${JSON.stringify(casino.name)}, ` +
          `experience ${JSON.stringify(experience.name)}, expiring ${expiredAt.toISOString()}. ` +
          `It is shown once, on the next line; send it as "Authorization: session:<token>".`,
      );
      result(token);
      return;
    }
    case "session revoke":
      return sessionRevoke(pool, command);
    case "casino add":
      return casinoAdd(pool, command);
    case "balance credit":
      return balanceCredit(pool, command);
    case "transfers list":
      return transfersList(pool, command.json);
  }
}

