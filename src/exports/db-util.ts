export { exactlyOneRow, maybeOneRow } from "../db/util.js";
