/// <reference types="graphile-build-pg" preserve="true" />
// (The reference above brings graphile-build-pg's declarations into a plugin
// author's program: `build.input.pgRegistry` in extendSchema callbacks is typed.)
import "../prelude.js";
// The schema-extension API plugins are written with: graphile-utils as it is
// (extendSchema, gql, wrapPlans, EXPORTABLE…), including makeExtendSchemaPlugin
// and makeWrapPlansPlugin, the v4-era names, so ported plugins work unchanged.
export * from "graphile-utils";
