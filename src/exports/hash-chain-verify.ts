// Verification without the hub's database: node:crypto only.
export { sha256, makeFinalHash, normalizeHash, pickOutcomeIndex, outcomeIndexOf } from "../fair/hash.js";
export { verifyOutcomeBet, verifyHashChain, type VerifyResult } from "../fair/verify.js";
