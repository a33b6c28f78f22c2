import "../prelude.js";
// The schema-extension API plugins are written with. makeExtendSchemaPlugin is the v4-era
// name of extendSchema; both are exported so ported plugins work unchanged.
export { extendSchema, makeExtendSchemaPlugin, gql, makeWrapPlansPlugin, wrapPlans, EXPORTABLE } from "graphile-utils";
export * from "graphile-utils";
