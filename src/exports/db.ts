export { superuserPool, withPgPoolTransaction } from "../db/pools.js";
export type * from "../db/types.js";
export type { PoolClient, Pool } from "pg";
