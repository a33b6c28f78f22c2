export { superuserPool, withPgPoolTransaction, withPgClientTransaction } from "../db/pools.js";
export type * from "../db/types.js";
export type { PoolClient, Pool } from "pg";
export { dbLockPlayerBalanceAndHouseBankroll, dbLockPlayerBalance, dbLockHouseBankroll } from "../db/locks.js";
export type { LockPlayerBalanceAndHouseBankrollInput, LockPlayerBalanceAndHouseBankrollResult, LockPlayerBalanceInput, LockHouseBankrollInput } from "../db/locks.js";
export { dbSettleBet, MAX_BET_METADATA_BYTES } from "../money/settle.js";
export type { SettleBetInput, SettledBet } from "../money/settle.js";
export { exactNet, isWholeAmount, MAX_AMOUNT } from "../money/exact.js";
