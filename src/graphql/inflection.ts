/**
 * Naming compatible with the schema existing game clients were generated against, so clients
 * generated against it keep working: the hub's own tables get a `Hub` prefix
 * (HubUser, allHubCasinos, hubUserById) and the tables of extraPgSchemas keep
 * plain names (app.coinflip → Coinflip, resource `coinflip`).
 */
export const HubInflectionPlugin: GraphileConfig.Plugin = {
  name: "HubInflectionPlugin",
  version: "0.1.0",
  inflection: {
    replace: {
      _schemaPrefix(_previous, _options, { pgNamespace }) {
        return pgNamespace.nspname === "hub" ? "hub_" : "";
      },
      // PostGraphile renames `id` to `rowId` to make room for Relay's global id;
      // with no Node interface there is nothing to make room for.
      _attributeName(previous, _options, details) {
        return previous!({ ...details, skipRowId: true });
      },
    },
  },
};
