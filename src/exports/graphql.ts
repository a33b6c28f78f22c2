// The server's own graphql module instance, so `instanceof GraphQLError` holds.
export * from "graphql";
