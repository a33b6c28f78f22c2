/**
 * The simulated casino of the transfer tests, as a process to drive with curl
 * (docs/deposits-and-withdrawals.md):
 *
 *   node --import tsx bench/sim-casino.ts [--port 4100] [--api-key demo-key]
 *
 * It speaks the hub's transfer protocol under /hub/transfers (Bearer <api key>)
 * and, without credentials, POST /admin/fund, POST /admin/deposit and
 * GET /admin/balances.
 */
import { benchArgs } from "./lib/args.js";
import { startSimCasino } from "../test/helpers/sim-casino.js";

const { values } = benchArgs("Usage: node --import tsx bench/sim-casino.ts [--port 4100] [--api-key demo-key]\n", { options: { port: { type: "string", default: "4100" }, "api-key": { type: "string", default: "demo-key" } } });
const casino = await startSimCasino({ port: Number(values.port), apiKey: values["api-key"], admin: true });
casino.on("outgoing", (key: string, outcome: { status: string; uname: string; amount: number; currencyKey: string }) =>
  console.log(`withdrawal ${key}: ${outcome.status} ${outcome.amount} ${outcome.currencyKey} to ${outcome.uname}`),
);
console.log(`simulated casino at ${casino.url} (transfers at ${casino.url}/hub/transfers, API key ${JSON.stringify(casino.apiKey)}); Ctrl-C stops it`);
const stop = () => void casino.close().then(() => process.exit(0));
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
