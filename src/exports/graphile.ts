/// <reference types="graphile-build-pg" preserve="true" />
// (The reference brings graphile-build-pg's additions to the build object,
// such as build.input.pgRegistry, into the types of a project that imports
// only @hubpkg/hub.)
import "../prelude.js";
// The schema-extension API plugins are written with: graphile-utils as it is
// (extendSchema, gql, wrapPlans, EXPORTABLE…), including makeExtendSchemaPlugin
// and makeWrapPlansPlugin, the v4-era names, so ported plugins work unchanged.
export * from "graphile-utils";
