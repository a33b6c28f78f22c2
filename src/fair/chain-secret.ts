/**
 * A chain's secret side: its seed h(0) and checkpoints, and the derivation of
 * any h(i) from them.
 *
 * Storage: the seed and every CHECKPOINT_INTERVAL-th hash, h(k), h(2k), …
 * below h(N), 32 bytes each (N = 1,000,000, k = 625: 1,599 checkpoints,
 * 51,168 bytes plus the 32-byte seed). h(i) is then at most k - 1 hashes away
 * from the checkpoint below it. The first derivation in a segment
 * [j·k, (j+1)·k) computes the whole segment once (at most 624 SHA-256, about
 * 0.8 ms) and keeps it in its server's cache; bets walk a chain downwards,
 * so the next k - 1 bets of that chain find their hash there: about one
 * SHA-256 per bet amortised. The checkpoints determine the chain, so every hub
 * process sharing the database derives the same hashes, whatever its cache
 * holds.
 *
 * Creating a chain costs N hashes once (1.3 s for N = 1,000,000 on one core
 * of the development machine). Long chains are computed on a worker thread
 * (at most two at once per server, shared fairly between players), so the event loop and its core keep serving
 * requests; short ones, where starting a worker would cost more, in chunks
 * that yield to the event loop.
 */
import { randomBytes, createHash } from "node:crypto";
import { Worker } from "node:worker_threads";
import { LRUCache } from "lru-cache";
import type pg from "pg";

type Queryable = Pick<pg.ClientBase, "query">;

export const CHECKPOINT_INTERVAL = 625;
/** Hashes computed between two yields to the event loop while a chain is created (a few ms). */
const CHUNK = 4096;
/** Segments kept per server: 256 × 625 × 32 bytes = 5 MiB at most. */
const CACHE_SEGMENTS = 256;

export interface NewChainSecret {
  seed: Buffer;
  checkpointInterval: number;
  /** h(k), h(2k), … for every multiple of k below maxIteration, concatenated. */
  checkpoints: Buffer;
  /** h(maxIteration), the public commitment. */
  terminalHash: Buffer;
}

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Chains at least this long are computed on a worker thread. */
const WORKER_THRESHOLD = 50_000;
const MAX_WORKERS = 2;

/** The same loop as chunkedChain, as a CommonJS script for an eval'd worker. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { createHash } = require("node:crypto");
const { maxIteration, k } = workerData;
let hash = Buffer.from(workerData.seed);
const checkpoints = Buffer.alloc(Math.floor((maxIteration - 1) / k) * 32);
for (let i = 1; i <= maxIteration; i++) {
  hash = createHash("sha256").update(hash).digest();
  if (i % k === 0 && i < maxIteration) hash.copy(checkpoints, (i / k - 1) * 32);
}
parentPort.postMessage({ checkpoints, terminalHash: hash });
`;

async function chunkedChain(seed: Buffer, maxIteration: number, k: number): Promise<{ checkpoints: Buffer; terminalHash: Buffer }> {
  const checkpoints = Buffer.alloc(Math.floor((maxIteration - 1) / k) * 32);
  let hash = seed;
  for (let i = 1; i <= maxIteration; i++) {
    hash = createHash("sha256").update(hash).digest();
    if (i % k === 0 && i < maxIteration) hash.copy(checkpoints, (i / k - 1) * 32);
    if (i % CHUNK === 0) await yieldToEventLoop();
  }
  return { checkpoints, terminalHash: hash };
}

/**
 * Most chain creations of one player in progress at once (waiting for a
 * worker, computing, or being stored); beyond, hubCreateHashChain is refused
 * with TOO_MANY_REQUESTS. A player needs one active chain, so a burst of
 * creations is only ever one player filling the queue every other player's
 * chain waits in.
 */
export const MAX_CHAIN_CREATIONS_PER_PLAYER = 2;

interface Segment {
  maxIteration: number;
  start: number;
  /** h(start), h(start + 1), … concatenated. */
  hashes: Buffer;
}

/**
 * One server's hash-chain work: the creations in progress per player, the
 * line for the worker threads, and the cache of derived segments. Each
 * computation runs on a worker thread of its own, started for it and ended
 * after it; nothing is shared between servers but the worker's source text.
 */
export interface ChainSecrets {
  /**
   * Count one creation of this player's in progress: the function to call once
   * it is over, or undefined when the player already has its share.
   */
  reserveCreation(player: string): (() => void) | undefined;
  /** A fresh random seed, its checkpoints and its terminal hash; `owner` is the line a long chain waits in. */
  generate(maxIteration: number, seed?: Buffer, owner?: string): Promise<NewChainSecret>;
  /** Forget a chain's cached segments (once it is revealed). */
  forget(hashChainId: string): void;
  /**
   * h(iteration) of a chain whose seed the hub holds (an unrevealed chain),
   * for 1 ≤ iteration ≤ maxIteration. Reads the secret on the given client
   * only when the segment is not in this cache. The result does not depend on
   * the cache: the checkpoints determine the chain.
   */
  intermediateHash(input: IntermediateHashInput): Promise<GetIntermediateHashResult>;
  /** The derived segments, by `chain id:segment index` (at most CACHE_SEGMENTS). */
  readonly segments: LRUCache<string, Segment>;
}

export function createChainSecrets(): ChainSecrets {
  const creationsInProgress = new Map<string, number>();
  const workers = createWorkerLines();
  const segments = new LRUCache<string, Segment>({ max: CACHE_SEGMENTS });
  return {
    segments,
    reserveCreation(player) {
      const n = creationsInProgress.get(player) ?? 0;
      if (n >= MAX_CHAIN_CREATIONS_PER_PLAYER) return undefined;
      creationsInProgress.set(player, n + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const left = (creationsInProgress.get(player) ?? 1) - 1;
        if (left > 0) creationsInProgress.set(player, left);
        else creationsInProgress.delete(player);
      };
    },
    async generate(maxIteration, seed = randomBytes(32), owner = "") {
      const k = CHECKPOINT_INTERVAL;
      const { checkpoints, terminalHash } = maxIteration >= WORKER_THRESHOLD ? await workers.run(seed, maxIteration, k, owner) : await chunkedChain(seed, maxIteration, k);
      return { seed, checkpointInterval: k, checkpoints, terminalHash };
    },
    forget(hashChainId) {
      for (const key of [...segments.keys()]) if (key.startsWith(`${hashChainId}:`)) segments.delete(key);
    },
    intermediateHash: (input) => intermediateHash(input, segments),
  };
}

/**
 * The workers are shared fairly: each player waits in its own line, and a
 * freed worker goes to the line that was served least recently (round robin),
 * not to whoever asked first, so one player's many creations cannot make
 * another's wait behind all of them. A Map keeps its keys in insertion
 * order: the player served is moved to the end.
 */
function createWorkerLines() {
  let workersRunning = 0;
  const workerLines = new Map<string, (() => void)[]>();

  function nextInLine(): void {
    const first = workerLines.entries().next();
    if (first.done) return;
    const [owner, line] = first.value;
    workerLines.delete(owner);
    const grant = line.shift()!;
    if (line.length > 0) workerLines.set(owner, line);
    grant();
  }

  async function run(seed: Buffer, maxIteration: number, k: number, owner: string): Promise<{ checkpoints: Buffer; terminalHash: Buffer }> {
    if (workersRunning >= MAX_WORKERS) {
      await new Promise<void>((resolve) => {
        const line = workerLines.get(owner);
        if (line) line.push(resolve);
        else workerLines.set(owner, [resolve]);
      });
    } else {
      workersRunning++;
    }
    try {
      return await workerChain(seed, maxIteration, k);
    } finally {
      // The worker passes to the next line (workersRunning unchanged), or is freed.
      if (workerLines.size > 0) nextInLine();
      else workersRunning--;
    }
  }
  return { run };
}

function workerChain(seed: Buffer, maxIteration: number, k: number): Promise<{ checkpoints: Buffer; terminalHash: Buffer }> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { seed: new Uint8Array(seed), maxIteration, k } });
    worker.once("message", (m: { checkpoints: Uint8Array; terminalHash: Uint8Array }) => {
      resolve({ checkpoints: Buffer.from(m.checkpoints), terminalHash: Buffer.from(m.terminalHash) });
      void worker.terminate();
    });
    worker.once("error", reject);
    worker.once("exit", (code) => reject(new Error(`the hash chain worker exited with code ${code} before answering`)));
  });
}

export type GetIntermediateHashResult = { type: "success"; hash: Uint8Array } | { type: "error"; reason: string };

/** Which hash to derive, and the client the chain's secret is read on when its segment is not cached. */
export interface IntermediateHashInput {
  hashChainId: string;
  iteration: number;
  pgClient: Queryable;
}

async function intermediateHash(input: IntermediateHashInput, cache: LRUCache<string, Segment>): Promise<GetIntermediateHashResult> {
  const { hashChainId, iteration } = input;
  if (!Number.isSafeInteger(iteration) || iteration < 1) {
    return { type: "error", reason: `iteration must be a whole number of at least 1; received ${iteration}.` };
  }
  const k = CHECKPOINT_INTERVAL;
  const segmentIndex = Math.floor(iteration / k);
  const key = `${hashChainId}:${segmentIndex}`;
  let segment = cache.get(key);
  if (!segment) {
    const { rows } = await input.pgClient.query<{ max_iteration: number; checkpoint_interval: number; start: Buffer | null }>(
      `select c.max_iteration, s.checkpoint_interval,
              case when $2::int / s.checkpoint_interval = 0 then s.seed
                   else substring(s.checkpoints from ($2::int / s.checkpoint_interval - 1) * 32 + 1 for 32) end as start
         from hub.hash_chain c join hub_secret.hash_chain_secret s on s.hash_chain_id = c.id
        where c.id = $1`,
      [hashChainId, iteration],
    );
    const row = rows[0];
    if (!row) return { type: "error", reason: `no hash chain ${hashChainId} whose seed the hub still holds (unknown, or already revealed).` };
    if (row.checkpoint_interval !== k) {
      return { type: "error", reason: `hash chain ${hashChainId} was stored with checkpoints every ${row.checkpoint_interval} hashes; this hub derives with ${k}.` };
    }
    if (!row.start || row.start.length !== 32) return { type: "error", reason: `hash chain ${hashChainId} has no checkpoint for iteration ${iteration}.` };
    const start = segmentIndex * k;
    const end = Math.min(start + k - 1, row.max_iteration);
    const hashes = Buffer.alloc((end - start + 1) * 32);
    let hash = row.start;
    hash.copy(hashes, 0);
    for (let i = 1; i <= end - start; i++) {
      hash = createHash("sha256").update(hash).digest();
      hash.copy(hashes, i * 32);
    }
    segment = { maxIteration: row.max_iteration, start, hashes };
    cache.set(key, segment);
  }
  if (iteration > segment.maxIteration) {
    return { type: "error", reason: `iteration ${iteration} is beyond the chain's last one, ${segment.maxIteration}.` };
  }
  const offset = (iteration - segment.start) * 32;
  return { type: "success", hash: new Uint8Array(segment.hashes.subarray(offset, offset + 32)) };
}
