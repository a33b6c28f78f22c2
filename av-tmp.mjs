import pg from "pg";
import { acquireCluster } from "/work/main/dist/src/test-kit/cluster.js";
const log = { debug(){}, info(){}, warn(){}, error(){}, child(){ return this; } };
const c = await acquireCluster({ log });
const a = new pg.Client({ connectionString: c.adminUrl }); await a.connect();
await a.query(`alter system set autovacuum = ${process.argv[2]}`); await a.query("select pg_reload_conf()");
console.log((await a.query("show autovacuum")).rows);
await a.end(); process.exit(0);
