export { superuserPool, withPgPoolTransaction, withPgClientTransaction } from "../db/pools.js";
export type * from "../db/types.js";
export type { PoolClient, Pool } from "pg";
export { dbLockPlayerBalanceAndHouseBankroll, dbLockPlayerBalance, dbLockHouseBankroll } from "../db/locks.js";
export type { LockPlayerBalanceAndHouseBankrollInput, LockPlayerBalanceAndHouseBankrollResult, LockPlayerBalanceInput, LockHouseBankrollInput } from "../db/locks.js";
