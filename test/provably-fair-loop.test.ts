import "./helpers/env.js";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import pg from "pg";
import { ROOT } from "./helpers/process.js";
import { makeOperator } from "./helpers/credentials.js";
import { tmpDir } from "./helpers/tmp.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import { play } from "./fixtures/provably-fair/play.js";

/*
 * The game author's index.ts (test/fixtures/provably-fair/index.ts) started as
 * its author starts it, in its own process with @hubpkg/hub resolved through
 * the package's exports to dist/, and a frontend's whole loop played against
 * it over HTTP (test/fixtures/provably-fair/play.ts): chain, bets, an exhausted
 * chain, a new chain and the retry, a tower climb, the reveal and the check of
 * every bet. Chains of 6 hashes (5 bets each) make 12 bets cross two chain ends.
 */

const CHAIN_LENGTH = 6;
const BETS = 12;

t.test("index.ts starts, and a frontend plays, retries and verifies the whole loop", async (t) => {
  const dataDir = tmpDir(t);
  // A database of the test kit's shared cluster: no initdb of its own (the example's migrations run on it).
  const database = await sharedClusterDatabase(t);
  const child = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "test/fixtures/provably-fair/index.ts")], {
    cwd: ROOT,
    env: {
      ...process.env,
      NODE_ENV: "test",
      LOG_LEVEL: "info",
      PORT: "0",
      HUB_DATA_DIR: dataDir,
      ...database,
      // On by default with the embedded database only.
      HUB_PLAYGROUND: "on",
      HASH_CHAIN_LENGTH: String(CHAIN_LENGTH),
      TSX_TSCONFIG_PATH: path.join(ROOT, "bench/tsconfig.child.json"),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill("SIGKILL");
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`index.ts did not start within 120 s:\n${output}`)), 120_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /hub listening on (http:\/\/[^/\s"]+)\/graphql/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`index.ts exited with ${code} before listening:\n${output}`));
    });
  });

  const operator = await makeOperator(database.SUPERUSER_DATABASE_URL);
  const lines: string[] = [];
  const summary = await play({ url, operatorKey: operator.key, bets: BETS, log: (line) => lines.push(line) });
  t.comment(lines.join("\n"));

  t.equal(summary.bets.length, BETS, "every bet was made");
  t.ok(summary.badHashChainErrors.length >= 2, `the chain ran out and the frontend started a new one (${summary.badHashChainErrors.length} times)`);
  for (const message of summary.badHashChainErrors) t.match(message, /^Hash chain .* is exhausted \(all its 5 hashes are used\); create a new one \(hubCreateHashChain\) and retry\.$/);
  t.equal(summary.chains.length, summary.badHashChainErrors.length + 1, "one new chain per exhaustion");
  const perChain = new Map<string, number>();
  for (const bet of summary.bets) perChain.set(bet.hashChainId, (perChain.get(bet.hashChainId) ?? 0) + 1);
  t.ok([...perChain.values()].every((n) => n <= CHAIN_LENGTH - 1), "no chain used for more bets than it has hashes");
  t.ok(summary.towerMoves.length >= 1, "the tower was climbed");
  t.equal(summary.verified, BETS + summary.towerMoves.length, "every bet and every tower floor verified from the revealed preimages");
  t.ok(summary.verifiedByHand, "and once with node:crypto alone");

  // The books of this player, from the database: the balance moved by exactly the bets' nets.
  const db = new pg.Pool({ connectionString: database.SUPERUSER_DATABASE_URL, max: 1 });
  const tower = await db.query("select net::float8 from app.tower_game where user_id = $1", [summary.userId]);
  const towerNet = tower.rows.reduce((s: number, r: { net: number }) => s + r.net, 0);
  const betNet = summary.bets.reduce((s, b) => s + b.net, 0);
  t.equal(summary.balanceAfter, summary.balanceBefore + betNet + towerNet, "balance after = before + every bet's net");
  const chains = await db.query("select count(*)::int as n, count(*) filter (where active)::int as active from hub.hash_chain where user_id = $1", [summary.userId]);
  t.same(chains.rows[0], { n: summary.chains.length, active: 0 }, "every chain revealed, none active");
  const secrets = await db.query("select count(*)::int as n from hub_secret.hash_chain_secret s join hub.hash_chain c on c.id = s.hash_chain_id where c.user_id = $1", [summary.userId]);
  t.equal(secrets.rows[0].n, 0, "the hub forgot the seeds it revealed");
  // Closed before the server stops its Postgres.
  await db.end();

  child.kill("SIGINT");
  t.equal(await exited, 0, "index.ts stops cleanly");
});
