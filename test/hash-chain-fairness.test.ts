import "./helpers/env.js";
import t from "tap";
import { startTestServer, createPlayer, createExperience } from "@hubpkg/hub/test";
import { gql } from "./helpers/http.js";

/**
 * One player's burst of hubCreateHashChain must not make another player's
 * chain wait behind it: the burst is bounded per player (the excess refused
 * with TOO_MANY_REQUESTS), and the chain workers are shared in turns between
 * players. Judged by order, not by time: how many of the flooder's chains
 * were answered while the other player's one creation was in progress.
 */
const BURST = 150;
const CREATE = "mutation { hubCreateHashChain { hashChain { id maxIteration } } }";

t.test("a burst of chain creations by one player: bounded, and another player's chain does not queue behind it", async (t) => {
  const server = await startTestServer();
  t.teardown(() => server.stop());
  const casinoId = server.playgroundCasinoId;
  const exp = await createExperience(server.dbPool, { casinoId, name: "chains" });
  const flooder = await createPlayer(server.dbPool, { casinoId, uname: "flooder" });
  const other = await createPlayer(server.dbPool, { casinoId, uname: "other" });
  const flooderAuth = { authorization: `session:${(await server.authenticate(flooder.id, exp.id)).token}` };
  const otherAuth = { authorization: `session:${(await server.authenticate(other.id, exp.id)).token}` };

  const events: string[] = [];
  let flooderAnswers = 0;
  const burst = Array.from({ length: BURST }, async () => {
    const res = await gql(server.url, CREATE, {}, flooderAuth);
    flooderAnswers++;
    const created = (res.body.data as any)?.hubCreateHashChain?.hashChain?.id !== undefined;
    if (created) events.push("flooder created");
    return { status: res.status, created, code: res.body.errors?.[0]?.extensions?.code as string | undefined };
  });
  // The burst is in the server once its first answer is back (a refusal, or before the bound a chain).
  const started = Date.now();
  while (flooderAnswers === 0) {
    if (Date.now() - started > 60_000) throw new Error("no answer to the burst within 60 s");
    await new Promise((r) => setTimeout(r, 5));
  }
  events.push("other sent");
  const sentAt = Date.now();
  const mine = await gql(server.url, CREATE, {}, otherAuth);
  events.push("other created");
  t.comment(`the other player's chain was answered ${Date.now() - sentAt} ms after it was sent`);
  t.match(mine.body, { data: { hubCreateHashChain: { hashChain: { id: /^[0-9a-f-]{36}$/ } } } }, "the other player's chain was created");

  const results = await Promise.all(burst);
  const created = results.filter((r) => r.created).length;
  const refused = results.filter((r) => r.code === "TOO_MANY_REQUESTS").length;
  t.equal(created + refused, BURST, `every creation of the burst was either made or refused TOO_MANY_REQUESTS (${created} made, ${refused} refused)`);
  t.ok(refused > 0, "the burst beyond the per-player bound was refused");
  t.same([...new Set(results.map((r) => r.status))], [200], "as GraphQL errors (HTTP 200)");

  // While the other player's creation was in progress, the flooder got at most the chains already being
  // computed plus the ones it had waiting (2 + 2), not the queue of its whole burst.
  const during = events.slice(events.indexOf("other sent"), events.indexOf("other created")).filter((e) => e === "flooder created").length;
  t.ok(during <= 4, `flooder chains answered while the other player's was in progress: ${during} (at most 4)`);

  const { rows } = await server.dbPool.query<{ n: number }>("select count(*)::int as n from hub.hash_chain where user_id = $1", [flooder.id]);
  t.equal(rows[0]!.n, created, "the flooder's chains in the database are exactly those answered");
});
