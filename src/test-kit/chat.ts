import { randomUUID } from "node:crypto";
import type { GraphQLClient } from "./index.js";

/** A chat message as the helpers read it. */
export interface ChatMessage {
  id: string;
  type: "user" | "system";
  body: string;
  clientId: string;
  userId: string | null;
  experienceId: string;
  casinoId: string;
  hiddenAt: string | null;
}

const MESSAGE_FIELDS = "id type body clientId userId experienceId casinoId hiddenAt";

/** What hubChatCreateUserMessage answered: the stored message, or why nothing was stored. */
export type PostChatMessageResult =
  | { __typename: "HubChatCreateUserMessageSuccess"; chatMessage: ChatMessage }
  | { __typename: "HubChatUserMuted" | "HubChatUserRateLimited"; message: string | null };

/**
 * Post as the player of `client` (from `server.authenticate(userId, experienceId)`)
 * to their session's experience. Without a clientId a fresh one is used; the
 * same clientId again answers the message already stored.
 */
export async function postChatMessage(client: GraphQLClient, body: string, clientId: string = randomUUID()): Promise<PostChatMessageResult> {
  const data = await client.request<{ hubChatCreateUserMessage: { result: PostChatMessageResult } }>(
    `mutation PostChatMessage($input: HubChatCreateUserMessageInput!) {
      hubChatCreateUserMessage(input: $input) {
        result {
          __typename
          ... on HubChatCreateUserMessageSuccess { chatMessage { ${MESSAGE_FIELDS} } }
          ... on HubChatUserMuted { message }
          ... on HubChatUserRateLimited { message }
        }
      }
    }`,
    { input: { body, clientId } },
  );
  return data.hubChatCreateUserMessage.result;
}

/** Post an operator's system message (client from `server.authenticateOperator()`). */
export async function postSystemChatMessage(client: GraphQLClient, experienceId: string, body: string, clientId: string = randomUUID()): Promise<ChatMessage> {
  const data = await client.request<{ hubChatCreateSystemMessage: { chatMessage: ChatMessage } }>(
    `mutation PostSystemChatMessage($input: HubChatCreateSystemMessageInput!) {
      hubChatCreateSystemMessage(input: $input) { chatMessage { ${MESSAGE_FIELDS} } }
    }`,
    { input: { experienceId, body, clientId } },
  );
  return data.hubChatCreateSystemMessage.chatMessage;
}

/**
 * The chat of an experience as `client` may read it (row-level security
 * applies: a player reads their session's experience only, and no hidden
 * message), newest first, `first` at a time (default 50), after the cursor
 * `after` of a previous page.
 */
export async function readChatMessages(
  client: GraphQLClient,
  experienceId: string,
  page: { first?: number; after?: string | null } = {},
): Promise<{ messages: ChatMessage[]; endCursor: string | null; hasNextPage: boolean }> {
  const data = await client.request<{
    hubExperienceById: { hubChatMessagesByExperienceId: { nodes: ChatMessage[]; pageInfo: { endCursor: string | null; hasNextPage: boolean } } } | null;
  }>(
    `query ReadChatMessages($experienceId: UUID!, $first: Int!, $after: Cursor) {
      hubExperienceById(id: $experienceId) {
        hubChatMessagesByExperienceId(orderBy: ID_DESC, first: $first, after: $after) {
          nodes { ${MESSAGE_FIELDS} }
          pageInfo { endCursor hasNextPage }
        }
      }
    }`,
    { experienceId, first: page.first ?? 50, after: page.after ?? null },
  );
  const connection = data.hubExperienceById?.hubChatMessagesByExperienceId;
  if (!connection) return { messages: [], endCursor: null, hasNextPage: false };
  return { messages: connection.nodes, endCursor: connection.pageInfo.endCursor, hasNextPage: connection.pageInfo.hasNextPage };
}
