import "../prelude.js";
// The server's own grafast instance: steps built by plugins must come from it.
export * from "grafast";
