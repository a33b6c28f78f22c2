/**
 * For the crash tests of the transfer worker: hub processes on one database
 * (the test kill them), a simulated casino, and a wait until the books agree.
 */
import path from "node:path";
import type { Test } from "tap";
import { startTestServer } from "@hubpkg/hub/test";
import { ROOT, startServerProcess, type ServerProcess } from "./process.js";
import { startSimCasino, type SimCasino } from "./sim-casino.js";
import { addSimCasino, reconcile, waitFor } from "./transfers.js";

/** A `node dist/server.js` on the given database with the transfers configuration; SIGKILLed at the end if still running. */
export function hubProcess(t: Test, urls: { databaseUrl: string; superuserDatabaseUrl: string }, dir: string): Promise<ServerProcess> {
  return startServerProcess({
    HUB_DATA_DIR: path.join(dir, "unused"),
    DATABASE_URL: urls.databaseUrl,
    SUPERUSER_DATABASE_URL: urls.superuserDatabaseUrl,
    HUB_CONFIG: path.join(ROOT, "test/fixtures/config-transfers.mjs"),
  }).then((p) => {
    t.teardown(() => {
      if (p.child.exitCode === null) p.child.kill("SIGKILL");
    });
    return p;
  });
}

/**
 * A simulated casino and a test server that only holds the database and answers GraphQL (the workers run in
 * the hub processes the test starts), with the casino added by an operator.
 */
export async function casinoAndDatabase(t: Test, transfers: { poll: boolean; takeRequests?: boolean }) {
  const casino = await startSimCasino();
  t.teardown(() => casino.close());
  const server = await startTestServer({ transfers: { worker: false } });
  t.teardown(() => server.stop());
  const { apiKey } = await server.authenticateOperator();
  const operator = { authorization: `apikey:${apiKey}` };
  const casinoId = await addSimCasino(server.url, operator, casino, transfers);
  return { casino, server, operator, casinoId };
}

/** Waits until nothing is pending and the casino's ledger and the hub's agree, then asserts both. */
export async function settled(t: Test, superuserUrl: string, casinoId: string, casino: SimCasino, timeoutMs = 30_000) {
  const result = await waitFor("every transfer settled", timeoutMs, async () => {
    const r = await reconcile(superuserUrl, casinoId, casino);
    return r.pending === 0 && r.problems.length === 0 ? r : undefined;
  }).catch(async (error: Error) => {
    t.comment(JSON.stringify(await reconcile(superuserUrl, casinoId, casino).catch((e: Error) => e.message)));
    throw error;
  });
  t.same(result.problems, [], "the casino's ledger and the hub's agree to the unit; every balance equals its ledger sum");
  t.equal(result.pending, 0, "nothing is pending");
  return result;
}
