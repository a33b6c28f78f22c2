/**
 * A simulated casino for the transfer tests: a real HTTP server speaking the
 * hub's transfer protocol (docs/deposits-and-withdrawals.md), with its own
 * ledger of player balances, that a test can tell to misbehave.
 */
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { EventEmitter } from "node:events";
import { randomUUID } from "node:crypto";

export type Endpoint = "incoming" | "ack" | "outgoing" | "lookup" | "takeList" | "takeTransfer" | "takeLookup" | "takeReject";

/**
 * - delay: apply (outgoing), then answer after ms (past the hub's timeout)
 * - error500: answer 500 without doing anything
 * - reset: cut the connection without doing anything
 * - applyThenReset: apply the transfer, then cut the connection
 * - hold: apply, emit "held", and answer only when release() is called
 * - refuse: refuse the transfer definitively
 */
export type Fault = { kind: "delay"; ms: number } | { kind: "error500" } | { kind: "reset" } | { kind: "applyThenReset" } | { kind: "hold" } | { kind: "refuse"; reason?: string };

interface Incoming {
  seq: number;
  id: string;
  uname: string;
  experience: string;
  currencyKey: string;
  amount: number;
  acked: boolean;
}

type Outcome = { status: "COMPLETED"; id: string } | { status: "REFUSED"; reason: string };

/** A take request the casino made: it asks the hub for the player's funds back. */
export interface SimTake {
  seq: number;
  id: string;
  uname: string;
  experience: string;
  currencyKey: string;
  /** null: the whole balance. */
  amount: number | null;
  status: "PENDING" | "TRANSFERRED" | "CONTROLLER_REJECTED" | "USER_CANCELED";
  /** The transfer's outcome, once the hub sent it (kept to answer repeats and lookups). */
  outcome?: Outcome & { amount: number };
  rejectReason?: string;
}

export interface SimCasino extends EventEmitter {
  url: string;
  /** The base URL to register the casino with (transfers under /hub/transfers). */
  baseUrl: string;
  apiKey: string;
  /** The casino's own ledger: player → currency → balance. */
  balances: Map<string, Map<string, number>>;
  incoming: Incoming[];
  outgoing: Map<string, Outcome & { uname: string; currencyKey: string; amount: number }>;
  takes: SimTake[];
  /** The casino asks the hub to take amount (null: everything) of the player's funds back; returns its id. */
  requestTake(uname: string, currencyKey: string, amount: number | null, experience?: string): string;
  /** The player withdraws the take request at the casino: a later transfer of it is refused. */
  cancelTake(id: string): void;
  /** How many requests each endpoint received. */
  hits: Record<Endpoint, number>;
  /** A player moves amount from the casino into the hub: debited here, offered as an incoming transfer. */
  deposit(uname: string, currencyKey: string, amount: number, experience?: string): string;
  /** Give a player money at the casino. */
  fund(uname: string, currencyKey: string, amount: number): void;
  balance(uname: string, currencyKey: string): number;
  /** The next `times` requests to endpoint get this fault. */
  failNext(endpoint: Endpoint, fault: Fault, times?: number): void;
  /** Every page of incoming transfers carries each transfer twice, and the previous page again. */
  duplicateIncoming: boolean;
  /** Forget the faults not yet used. */
  clearFaults(): void;
  /** Answer held requests. */
  release(): void;
  /** Stop listening for ms (connections refused), then listen again on the same port. */
  goAway(ms: number): Promise<void>;
  /** Sum of what players moved into the hub minus what came back, per player and currency. */
  netToHub(): Map<string, number>;
  close(): Promise<void>;
}

const json = (res: http.ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};

/**
 * admin: also serve, without credentials, POST /admin/fund, POST /admin/deposit and
 * POST /admin/take ({ uname, currencyKey, amount, experience? }; a take's amount may
 * be null), GET /admin/balances and GET /admin/takes, for a
 * person driving it with curl (bench/sim-casino.ts).
 */
export async function startSimCasino(options: { apiKey?: string; port?: number; admin?: boolean } = {}): Promise<SimCasino> {
  const apiKey = options.apiKey ?? `casino-key-${Math.random().toString(36).slice(2)}`;
  const emitter = new EventEmitter() as SimCasino;
  const balances = new Map<string, Map<string, number>>();
  const incoming: Incoming[] = [];
  const outgoing: SimCasino["outgoing"] = new Map();
  const takes: SimTake[] = [];
  const faults: Record<Endpoint, Fault[]> = { incoming: [], ack: [], outgoing: [], lookup: [], takeList: [], takeTransfer: [], takeLookup: [], takeReject: [] };
  const hits: Record<Endpoint, number> = { incoming: 0, ack: 0, outgoing: 0, lookup: 0, takeList: 0, takeTransfer: 0, takeLookup: 0, takeReject: 0 };
  const held: (() => void)[] = [];
  const sockets = new Set<Socket>();
  let seq = 0;
  let transferSeq = 0;

  const adjust = (uname: string, currencyKey: string, delta: number) => {
    const player = balances.get(uname) ?? new Map<string, number>();
    balances.set(uname, player);
    const next = (player.get(currencyKey) ?? 0) + delta;
    if (next < 0) throw new Error(`sim casino: ${uname} cannot afford ${-delta} ${currencyKey}`);
    player.set(currencyKey, next);
  };

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://casino");
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      if (options.admin && url.pathname.startsWith("/admin/")) {
        try {
          if (req.method === "GET" && url.pathname === "/admin/balances") {
            return json(res, 200, Object.fromEntries([...balances].map(([u, m]) => [u, Object.fromEntries(m)])));
          }
          const input = JSON.parse(body || "{}") as { uname: string; currencyKey: string; amount: number | null; experience?: string };
          if (req.method === "POST" && url.pathname === "/admin/take") {
            return json(res, 200, { id: emitter.requestTake(input.uname, input.currencyKey, input.amount ?? null, input.experience) });
          }
          if (req.method === "GET" && url.pathname === "/admin/takes") {
            return json(res, 200, takes.map(({ id, uname, currencyKey, amount, status }) => ({ id, uname, currencyKey, amount, status })));
          }
          if (input.amount === null) return json(res, 400, { error: "amount must be a number" });
          if (req.method === "POST" && url.pathname === "/admin/fund") {
            emitter.fund(input.uname, input.currencyKey, input.amount);
            return json(res, 200, { balance: emitter.balance(input.uname, input.currencyKey) });
          }
          if (req.method === "POST" && url.pathname === "/admin/deposit") {
            const id = emitter.deposit(input.uname, input.currencyKey, input.amount, input.experience);
            return json(res, 200, { id, balance: emitter.balance(input.uname, input.currencyKey) });
          }
        } catch (error) {
          return json(res, 400, { error: (error as Error).message });
        }
        return json(res, 404, { error: "no such route" });
      }
      if (req.headers.authorization !== `Bearer ${apiKey}`) return json(res, 401, { error: "bad api key" });
      const path = url.pathname.replace(/^\/hub\/transfers/, "");
      let endpoint: Endpoint | undefined;
      let match: RegExpExecArray | null = null;
      if (req.method === "GET" && path === "/incoming") endpoint = "incoming";
      else if (req.method === "POST" && (match = /^\/incoming\/([^/]+)\/ack$/.exec(path))) endpoint = "ack";
      else if (req.method === "POST" && path === "/outgoing") endpoint = "outgoing";
      else if (req.method === "GET" && /^\/outgoing\/[^/]+$/.test(path)) endpoint = "lookup";
      else if (req.method === "GET" && path === "/take-requests") endpoint = "takeList";
      else if ((match = /^\/take-requests\/([^/]+)\/(transfer|reject)$/.exec(path))) {
        endpoint = match[2] === "reject" ? (req.method === "POST" ? "takeReject" : undefined) : req.method === "POST" ? "takeTransfer" : "takeLookup";
      }
      if (!endpoint) return json(res, 404, { error: "no such route" });
      hits[endpoint]++;
      const fault = faults[endpoint].shift();
      if (fault?.kind === "error500") return json(res, 500, { error: "simulated failure" });
      if (fault?.kind === "reset") return req.socket.destroy();

      let status = 200;
      let answer: unknown;
      if (endpoint.startsWith("take")) {
        const taken = takeAnswer(endpoint, url, match, body, fault);
        if (!taken) return json(res, 404, endpoint === "takeLookup" ? { status: "NOT_FOUND" } : { error: "unknown take request" });
        [status, answer] = taken;
      } else if (endpoint === "incoming") {
        const after = Number(url.searchParams.get("cursor") ?? "0");
        const limit = Number(url.searchParams.get("limit") ?? "100");
        const page = incoming.filter((t) => t.seq > after).slice(0, limit);
        const cursor = page.length ? String(page[page.length - 1]!.seq) : String(after);
        let sent = page.map(({ id, uname, experience, currencyKey, amount }) => ({ id, uname, experience, currencyKey, amount }));
        if (emitter.duplicateIncoming) {
          const previous = incoming.filter((t) => t.seq <= after).slice(-limit).map(({ id, uname, experience, currencyKey, amount }) => ({ id, uname, experience, currencyKey, amount }));
          sent = [...previous, ...sent.flatMap((t) => [t, { ...t }])];
        }
        answer = { transfers: sent, cursor, more: incoming.some((t) => t.seq > Number(cursor)) };
      } else if (endpoint === "ack") {
        const id = decodeURIComponent(match![1]!);
        const t = incoming.find((x) => x.id === id);
        if (!t) return json(res, 404, { error: "unknown transfer" });
        t.acked = true;
        answer = { ok: true };
      } else if (endpoint === "lookup") {
        const key = decodeURIComponent(path.slice("/outgoing/".length));
        const found = outgoing.get(key);
        if (!found) return json(res, 404, { status: "NOT_FOUND" });
        answer = found.status === "COMPLETED" ? { status: "COMPLETED", id: found.id } : { status: "REFUSED", reason: found.reason };
      } else {
        const input = JSON.parse(body) as { idempotencyKey: string; uname: string; currencyKey: string; amount: number; expiresAt: string };
        let found = outgoing.get(input.idempotencyKey);
        if (!found) {
          let outcome: Outcome;
          if (fault?.kind === "refuse") outcome = { status: "REFUSED", reason: fault.reason ?? "refused by the simulated casino" };
          else if (Date.now() > Date.parse(input.expiresAt)) outcome = { status: "REFUSED", reason: "expired" };
          else {
            adjust(input.uname, input.currencyKey, input.amount);
            outcome = { status: "COMPLETED", id: `out-${++transferSeq}` };
          }
          found = { ...outcome, uname: input.uname, currencyKey: input.currencyKey, amount: input.amount };
          outgoing.set(input.idempotencyKey, found);
          emitter.emit("outgoing", input.idempotencyKey, found);
        }
        if (found.status === "REFUSED") status = 422;
        answer = found.status === "COMPLETED" ? { status: "COMPLETED", id: found.id } : { status: "REFUSED", reason: found.reason };
      }
      if (fault?.kind === "applyThenReset") return req.socket.destroy();
      if (fault?.kind === "hold") {
        held.push(() => json(res, status, answer));
        emitter.emit("held", endpoint);
        return;
      }
      if (fault?.kind === "delay") {
        setTimeout(() => {
          if (!res.destroyed) json(res, status, answer);
        }, fault.ms);
        return;
      }
      json(res, status, answer);
    });
  });
  /** The casino's side of a take request: list, transfer (at most once per take request), lookup, reject. */
  function takeAnswer(endpoint: Endpoint, url: URL, match: RegExpExecArray | null, body: string, fault: Fault | undefined): [number, unknown] | undefined {
    if (endpoint === "takeList") {
      const after = Number(url.searchParams.get("cursor") ?? "0");
      const limit = Number(url.searchParams.get("limit") ?? "100");
      const page = takes.filter((t) => t.seq > after).slice(0, limit);
      const cursor = page.length ? String(page[page.length - 1]!.seq) : String(after);
      const sent = page.map(({ id, uname, experience, currencyKey, amount }) => ({ id, uname, experience, currencyKey, amount }));
      return [200, { takeRequests: emitter.duplicateIncoming ? sent.flatMap((t) => [t, { ...t }]) : sent, cursor, more: takes.some((t) => t.seq > Number(cursor)) }];
    }
    const take = takes.find((t) => t.id === decodeURIComponent(match![1]!));
    if (!take) return undefined;
    const shown = (o: NonNullable<SimTake["outcome"]>): [number, unknown] =>
      o.status === "COMPLETED" ? [200, { status: "COMPLETED", id: o.id }] : [422, { status: "REFUSED", reason: o.reason, takeRequestStatus: take.status }];
    if (endpoint === "takeLookup") return take.outcome ? shown(take.outcome) : undefined;
    if (endpoint === "takeReject") {
      if (take.status === "PENDING") take.status = "CONTROLLER_REJECTED";
      take.rejectReason = (JSON.parse(body || "{}") as { reason?: string }).reason ?? "";
      emitter.emit("takeRejected", take.id);
      return [200, { status: take.status }];
    }
    if (!take.outcome) {
      const input = JSON.parse(body) as { amount: number; expiresAt: string };
      if (fault?.kind === "refuse") take.outcome = { status: "REFUSED", reason: fault.reason ?? "refused by the simulated casino", amount: input.amount };
      else if (take.status === "USER_CANCELED") take.outcome = { status: "REFUSED", reason: "the player canceled the take request", amount: input.amount };
      else if (take.status !== "PENDING") take.outcome = { status: "REFUSED", reason: `the take request is ${take.status}`, amount: input.amount };
      else if (Date.now() > Date.parse(input.expiresAt)) take.outcome = { status: "REFUSED", reason: "expired", amount: input.amount };
      else {
        adjust(take.uname, take.currencyKey, input.amount);
        take.status = "TRANSFERRED";
        take.outcome = { status: "COMPLETED", id: randomUUID(), amount: input.amount };
      }
      emitter.emit("takeTransfer", take.id, take.outcome);
    }
    return shown(take.outcome);
  }

  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;

  return Object.assign(emitter, {
    url,
    baseUrl: url,
    apiKey,
    balances,
    incoming,
    outgoing,
    takes,
    hits,
    duplicateIncoming: false,
    deposit(uname: string, currencyKey: string, amount: number, experience = "main") {
      adjust(uname, currencyKey, -amount);
      const id = `in-${++seq}-${Math.random().toString(36).slice(2, 8)}`;
      incoming.push({ seq, id, uname, experience, currencyKey, amount, acked: false });
      return id;
    },
    requestTake(uname: string, currencyKey: string, amount: number | null, experience = "main") {
      const id = randomUUID();
      takes.push({ seq: ++seq, id, uname, experience, currencyKey, amount, status: "PENDING" });
      return id;
    },
    cancelTake(id: string) {
      const take = takes.find((t) => t.id === id);
      if (take?.status === "PENDING") take.status = "USER_CANCELED";
    },
    fund(uname: string, currencyKey: string, amount: number) {
      adjust(uname, currencyKey, amount);
    },
    balance(uname: string, currencyKey: string) {
      return balances.get(uname)?.get(currencyKey) ?? 0;
    },
    failNext(endpoint: Endpoint, fault: Fault, times = 1) {
      for (let i = 0; i < times; i++) faults[endpoint].push(fault);
    },
    clearFaults() {
      for (const list of Object.values(faults)) list.splice(0);
    },
    release() {
      for (const answer of held.splice(0)) answer();
    },
    async goAway(ms: number) {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      await new Promise((r) => setTimeout(r, ms));
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, "127.0.0.1", () => {
          server.off("error", reject);
          resolve();
        });
      });
    },
    netToHub() {
      const net = new Map<string, number>();
      const add = (k: string, d: number) => net.set(k, (net.get(k) ?? 0) + d);
      for (const t of incoming) add(`${t.uname}/${t.currencyKey}`, t.amount);
      for (const o of outgoing.values()) if (o.status === "COMPLETED") add(`${o.uname}/${o.currencyKey}`, -o.amount);
      for (const t of takes) if (t.outcome?.status === "COMPLETED") add(`${t.uname}/${t.currencyKey}`, -t.outcome.amount);
      return net;
    },
    async close() {
      held.splice(0);
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}
