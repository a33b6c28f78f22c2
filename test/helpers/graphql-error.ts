import { ClientError } from "@hubpkg/hub/test";

/** The first GraphQL error a request through the test kit's client was refused with; fails when it was not refused. */
export async function errorOf(promise: Promise<unknown>) {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ClientError) return error.response.errors![0]!;
    throw error;
  }
  throw new Error("expected a GraphQL error");
}
