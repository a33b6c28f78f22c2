import pg from "pg";
// Internal helpers (not a public sub-path): tests mint real credentials in the real database.
import { createApiKey, createSession, ensurePlayer } from "../../dist/src/auth/credentials.js";

export interface Player {
  token: string;
  sessionId: string;
  userId: string;
  casinoId: string;
  experienceId: string;
  header: { authorization: string };
}

export async function withPool<T>(url: string, fn: (pool: pg.Pool) => Promise<T>): Promise<T> {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  // pool.end() resolves before its clients' sockets close: a test that stops Postgres (or drops the
  // database) right after may reach a client still ending, whose FATAL the pool re-emits. Nothing
  // waits on this pool by then.
  pool.on("error", () => undefined);
  try {
    return await fn(pool);
  } finally {
    await pool.end();
  }
}

export function makePlayer(url: string, uname: string, opts: { casinoName?: string; experienceName?: string; expiresInSeconds?: number } = {}): Promise<Player> {
  return withPool(url, async (pool) => {
    const { user, casino, experience } = await ensurePlayer(pool, { uname, ...opts });
    const { token, sessionId } = await createSession(pool, {
      userId: user.id,
      casinoId: casino.id,
      experienceId: experience.id,
      ...(opts.expiresInSeconds !== undefined ? { expiresInSeconds: opts.expiresInSeconds } : {}),
    });
    return { token, sessionId, userId: user.id, casinoId: casino.id, experienceId: experience.id, header: { authorization: `session:${token}` } };
  });
}

export function makeOperator(url: string): Promise<{ key: string; id: string; header: { authorization: string } }> {
  return withPool(url, async (pool) => {
    const { key, id } = await createApiKey(pool);
    return { key, id, header: { authorization: `apikey:${key}` } };
  });
}
