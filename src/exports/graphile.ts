/// <reference types="graphile-build-pg" preserve="true" />
// (The reference above brings graphile-build-pg's declarations into a plugin
// author's program: `build.input.pgRegistry` in extendSchema callbacks is typed.)
import "../prelude.js";
import { extendSchema as graphileExtendSchema } from "graphile-utils";
import { callerSite, checkExtension, PLUGIN_SOURCE, type PluginSource } from "../graphql/plugin-checks.js";
// The schema-extension API plugins are written with: graphile-utils as it is
// (extendSchema, gql, wrapPlans, EXPORTABLE…), including makeExtendSchemaPlugin
// and makeWrapPlansPlugin, the v4-era names, so ported plugins work unchanged.
export * from "graphile-utils";

type Generator = Parameters<typeof graphileExtendSchema>[0];

/**
 * graphile-utils' extendSchema, which also stops the start (HUB_PLUGIN_FAILED)
 * on what graphile-utils lets through: a resolver or plan for a field the
 * typeDefs do not declare, a mutation with neither (src/graphql/plugin-checks.ts).
 */
export function extendSchema(generator: Generator, uniquePluginName?: string): GraphileConfig.Plugin {
  const source: PluginSource = { site: callerSite() };
  const checked = (build: GraphileBuild.Build) => {
    const definition =
      typeof generator === "function"
        ? // A two-argument generator gets (build, options), as graphile-utils gives it.
          (generator as (build: GraphileBuild.Build, options?: unknown) => Exclude<Generator, Function>)(build, ...(generator.length >= 2 ? [build.options] : []))
        : generator;
    checkExtension(definition as unknown as Record<string, unknown>, plugin.name, source);
    return definition;
  };
  const plugin = graphileExtendSchema(checked, uniquePluginName);
  Object.defineProperty(plugin, PLUGIN_SOURCE, { value: source, enumerable: false });
  return plugin;
}

/** @deprecated graphile-utils' name for extendSchema, kept for plugins written for it. */
export const makeExtendSchemaPlugin = extendSchema;
