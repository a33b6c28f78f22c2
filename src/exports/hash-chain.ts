// What custom provably fair games use: the chain rows, the hashes, the arithmetic and the verifier.
export {
  dbLockHubHashChain,
  dbInsertHubHash,
  dbNextHubHashChainIteration,
  dbCreateHubHashChain,
  dbRevealHubHashChain,
  DEFAULT_HASH_CHAIN_LENGTH,
  MAX_HASH_CHAIN_LENGTH,
  type DbHashChain,
  type DbHash,
  type DbHashKind,
} from "../fair/db.js";
export { getIntermediateHash, CHECKPOINT_INTERVAL, type GetIntermediateHashResult } from "../fair/chain-secret.js";
export * from "./hash-chain-verify.js";
export { validateRisk, riskLimitsOf, playerRiskLimits, coarseLimit, type RiskPolicy, type RiskPolicyArgs, type RiskLimits, type ValidateRiskInput, type ValidateRiskResult } from "../fair/risk.js";
export { makeOutcomeBet, checkOutcomeBetInput, netOf, MAX_OUTCOMES, MAX_CLIENT_SEED_LENGTH, HOUSE_EDGE_TOLERANCE, type MakeOutcomeBetInput, type MakeOutcomeBetResult } from "../fair/outcome-bet.js";
