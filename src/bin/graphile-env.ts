/**
 * The hub's commands choose the Graphile packages' mode for their process:
 * grafast and its helpers read GRAPHILE_ENV once, when they load, so it is set
 * here, before them, from NODE_ENV: production runs the fast planner,
 * anything else the checked one. A value already set is kept. The library
 * never writes it: an application of its own sets it as it likes (unset,
 * grafast follows NODE_ENV, and warns when that is unset too).
 */
if (!process.env.GRAPHILE_ENV) {
  process.env.GRAPHILE_ENV = process.env.NODE_ENV === "production" ? "production" : "development";
}

export {};
