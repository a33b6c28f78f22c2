/**
 * Test processes load TypeScript by Node's own type stripping when npm test
 * asks tap for it (TAP_TYPE_STRIP_ONLY=1, test/run-all.mjs; Node 22.18 and
 * later): a third of a second less per test process than tap's TypeScript
 * compiler. Node then takes import specifiers literally, and the tests import
 * their helpers as the compiler wants them written ("./helpers/env.js" for
 * env.ts): this hook resolves a relative ".js" import of a .ts file that has
 * no such .js beside it to the .ts. Without type stripping (Node 20, or a
 * file run alone with tap's compiler) nothing reaches it unresolved.
 */
import { register } from "node:module";

register(new URL("./ts-specifiers-hooks.mjs", import.meta.url));
