/**
 * HubOutcomeInput is the input type PostGraphile derives from the composite
 * hub.outcome; hubMakeOutcomeBet needs both of its fields, so they are
 * non-null here (a composite type's attributes cannot be NOT NULL in SQL).
 */
export const HubOutcomeInputPlugin: GraphileConfig.Plugin = {
  name: "HubOutcomeInputPlugin",
  version: "0.1.0",
  schema: {
    hooks: {
      GraphQLInputObjectType_fields(fields, build, context) {
        const { pgCodec, isInputType } = context.scope as { pgCodec?: { name: string }; isInputType?: boolean };
        if (!isInputType || pgCodec?.name !== "hubOutcome") return fields;
        const { GraphQLNonNull, isNonNullType } = build.graphql;
        return Object.fromEntries(
          Object.entries(fields).map(([name, field]) => [name, isNonNullType(field.type) ? field : { ...field, type: new GraphQLNonNull(field.type) }]),
        ) as typeof fields;
      },
    },
  },
};
