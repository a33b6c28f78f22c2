import "./helpers/env.js";
import t from "tap";
import { gql } from "./helpers/http.js";
import { startServerProcess } from "./helpers/process.js";
import { makeOperator, makePlayer } from "./helpers/credentials.js";
import { tmpDir } from "./helpers/tmp.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";

t.test("node dist/server.js runs the demo: reference plugins and routes", async (t) => {
  // A database of the test kit's shared cluster: no initdb of its own (the demo's migrations run on it).
  const database = await sharedClusterDatabase(t);
  const server = await startServerProcess({ ...database, HUB_DATA_DIR: tmpDir(t) });
  t.teardown(() => server.child.kill("SIGKILL"));
  const url = database.SUPERUSER_DATABASE_URL;
  const alice = await makePlayer(url, "alice");
  const bob = await makePlayer(url, "bob");
  const operator = await makeOperator(url);

  // /health: JSON with a status string.
  const health = await fetch(`${server.url}/health`);
  t.equal(health.status, 200);
  t.match(await health.json(), { status: "ok" });

  // GraphQL: the demo's plugins are there.
  const fortune = await gql(server.url, "{ randomFortune { id text } }");
  t.match(fortune.body.data, { randomFortune: { id: Number, text: String } });
  const flip = await gql(server.url, 'mutation { makeCoinflip(input: { currency: "HOUSE", wager: 5 }) { id wager net currencyKey userId } }', {}, alice.header);
  t.same(flip.body.errors, undefined);
  const coinflip = (flip.body.data as any).makeCoinflip;
  t.match(coinflip, { wager: 5, currencyKey: "HOUSE", userId: alice.userId });
  t.ok(coinflip.net === 4.95 || coinflip.net === -5, "net is wager*0.99 or -wager");
  t.same((await gql(server.url, 'mutation { makeCoinflip(input: { currency: "HOUSE", wager: 5 }) { id } }')).body, { data: { makeCoinflip: null } }, "no identity: null, no error");
  const low = await gql(server.url, 'mutation { makeCoinflip(input: { currency: "HOUSE", wager: 0.5 }) { id } }', {}, alice.header);
  t.match(low.body.errors?.[0]?.message, /wager must be at least 1/i);

  // The games as the other revision's template configures them: outcome bets, the tower, their risk limits.
  const schema = await gql(server.url, "{ __schema { mutationType { fields { name } } } }");
  const mutations = (schema.body.data as any).__schema.mutationType.fields.map((f: { name: string }) => f.name);
  for (const name of ["hubMakeOutcomeBet", "startTower", "moveTower", "cashOutTower"]) t.ok(mutations.includes(name), `the demo has ${name}`);
  const limits = await gql(server.url, "{ hubRiskLimits(gameKinds: [GENERAL, TOWER]) { currency gameKind maxPayout } }", {}, alice.header);
  t.same(limits.body.errors, undefined);
  t.same(
    (limits.body.data as any).hubRiskLimits.filter((l: { currency: string }) => l.currency === "HOUSE").map((l: { gameKind: string }) => l.gameKind),
    ["GENERAL", "TOWER"],
    "hubRiskLimits answers for both game kinds",
  );

  // /bets: 401 plain text unless a player; else that player's bets only.
  for (const headers of [{}, operator.header, { authorization: "session:bogus" }]) {
    const res = await fetch(`${server.url}/bets`, { headers });
    t.equal(res.status, 401);
    t.match(res.headers.get("content-type"), /text\/plain/);
    t.equal(await res.text(), "Unauthorized");
  }
  const bets = (await (await fetch(`${server.url}/bets`, { headers: alice.header })).json()) as { id: string; kind: string; net: number }[];
  t.same(bets.map((b) => [b.kind, b.id, b.net]), [["coinflip", coinflip.id, coinflip.net]], "alice sees her bet");
  t.same(await (await fetch(`${server.url}/bets`, { headers: bob.header })).json(), [], "bob sees none of alice's");

  // /metrics: 401 unless an operator; else figures worth having.
  for (const headers of [{}, alice.header]) {
    const res = await fetch(`${server.url}/metrics`, { headers });
    t.equal(res.status, 401);
    t.equal(await res.text(), "Unauthorized");
  }
  const metrics = (await (await fetch(`${server.url}/metrics`, { headers: operator.header })).json()) as { metrics: any };
  t.match(metrics.metrics, { uptimeSeconds: Number, bets: { coinflip: 1, total: 1 }, requests: { total: Number, graphql: Number, express: Number } });
  t.ok(metrics.metrics.requests.graphql >= 3, "GraphQL requests are counted");
  t.ok(metrics.metrics.requests.express >= 5, "Express requests are counted");
  t.ok(metrics.metrics.requests.status4xx >= 5, "the 401s are counted");

  server.child.kill("SIGINT");
  t.equal(await server.exited, 0);
});
