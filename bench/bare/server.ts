/**
 * A reference point, not a target of `npm run bench`: Fastify 5 + grafserv's
 * Fastify adapter serving the same preset as the hub and the baseline, and
 * nothing else (no identity hook, no request ids, logging off, no Express
 * app, no response counting). `bench/ab.ts` compares it with the hub and the
 * baseline: what the hub adds to a request, and the ratio the framework change
 * alone gives on this machine.
 */
import "../lib/child-prelude.js";
import "../../dist/src/prelude.js";
import type { AddressInfo } from "node:net";
import { grafserv } from "grafserv/fastify/v5";
import Fastify from "fastify";
import { MAX_BODY } from "../lib/demo-preset.js";
import { attachToBenchDatabase } from "../lib/attach.js";
import { serveBench } from "../lib/child.js";

const { db, pgl, close } = await attachToBenchDatabase();
const serv = pgl.createServ(grafserv);
const f = Fastify({ logger: false, bodyLimit: MAX_BODY });
await serv.addTo(f);
await f.listen({ port: 0, host: "127.0.0.1" });
const { port } = f.server.address() as AddressInfo;
serveBench({ url: `http://127.0.0.1:${port}`, superuserDatabaseUrl: db.superuserUrl }, async () => {
  await f.close();
  await close();
});
