/**
 * The chat's mutations and its subscription, with the original hub's names and
 * shapes. The tables themselves (HubChatMessage, HubChatMod, HubChatMute,
 * their lookups and relations) come from the schema, under row-level security.
 */
import { access, context, lambda, listen, sideEffect } from "grafast";
import { pgSelectSingleFromRecord, sqlValueWithCodec, TYPES } from "@dataplan/pg";
import { extendSchema, gql } from "graphile-utils";
import type pg from "pg";
import type { Identity } from "../auth/identity.js";
import { ErrorCode } from "../errors.js";
import { clientError } from "../graphql/client-error.js";
import { liveTopic, resumeTopic, type ChatAlert } from "../live/notifications.js";
import { afterArg } from "../graphql/live-alerts.js";
import {
  CHAT_MAX_REASON_LENGTH,
  checkChatBody,
  CHAT_LINE_BREAKING,
  dbAddMod,
  dbCreateSystemMessage,
  dbCreateUserMessage,
  dbHideMessage,
  dbIsChatMod,
  dbMuteUser,
  dbRemoveMod,
  dbUnmuteUser,
  type ChatModerator,
  type ChatPlayer,
} from "./db.js";

function unauthorized(identity: Identity | undefined, field: string, needs: string): never {
  throw clientError(
    identity ? ErrorCode.FORBIDDEN : ErrorCode.UNAUTHENTICATED,
    `Unauthorized: ${field} needs ${needs}; received ${identity ? (identity.kind === "user" ? "a player's session" : "an operator API key") : "no valid credential"}.`,
  );
}

function requirePlayer(identity: Identity | undefined, field: string): ChatPlayer {
  if (identity?.kind !== "user") unauthorized(identity, field, "a player's session (Authorization: session:<key>)");
  return identity.session;
}

function requireOperator(identity: Identity | undefined, field: string): string {
  if (identity?.kind !== "operator") unauthorized(identity, field, "an operator API key (Authorization: apikey:<key>)");
  return `api_key:${identity.apiKeyId}`;
}

/** An operator, or a player who is a mod of their session's experience. */
async function requireModerator(pool: pg.Pool, identity: Identity | undefined, field: string): Promise<ChatModerator> {
  if (identity?.kind === "operator") return { kind: "operator", actor: `api_key:${identity.apiKeyId}` };
  if (identity?.kind === "user" && (await dbIsChatMod(pool, identity.session))) {
    return { kind: "mod", actor: `user:${identity.session.user_id}`, player: identity.session };
  }
  return unauthorized(identity, field, "an operator API key or the session of a mod of the experience");
}

function muteExpiry(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  const date = new Date(String(value));
  if (Number.isNaN(date.getTime()) || date.getTime() <= Date.now()) {
    throw clientError(ErrorCode.CHAT_MUTE_INVALID, `hubChatMuteUser: expiredAt must be a time in the future, or null for a mute without end; received ${JSON.stringify(value)}.`);
  }
  return date;
}

function muteReason(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  const reason = String(value);
  if ([...reason].length > CHAT_MAX_REASON_LENGTH) {
    throw clientError(ErrorCode.CHAT_MUTE_INVALID, `hubChatMuteUser: reason may have at most ${CHAT_MAX_REASON_LENGTH} characters; received ${[...reason].length}.`);
  }
  // Shown inside the muted player's one-line answer: one line too.
  const control = CHAT_LINE_BREAKING.exec(reason);
  if (control) {
    const code = control[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0");
    throw clientError(ErrorCode.CHAT_MUTE_INVALID, `hubChatMuteUser: reason must be one line, without control characters or line and paragraph separators; received U+${code} at index ${control.index}.`);
  }
  return reason;
}

const byTypename = {
  planType($specifier: any) {
    return { $__typename: lambda($specifier, (r: any) => r.__typename as string, true), planForType: () => $specifier };
  },
};

const ALERT_TYPENAME: Record<ChatAlert["kind"], string> = {
  message: "HubChatSubscriptionNewMessage",
  muted: "HubChatSubscriptionMuted",
  unmuted: "HubChatSubscriptionUnmuted",
};

type Input = Record<string, unknown>;

/** A mutation's plan: the async work on the superuser pool, once, with the caller's identity. */
function effect(fn: (input: Input, identity: Identity | undefined, pool: pg.Pool) => Promise<unknown>) {
  return (_parent: unknown, fieldArgs: any) =>
    sideEffect([fieldArgs.getRaw("input"), context().get("identity"), context().get("superuserPool")], ([input, identity, pool]) =>
      fn((input ?? {}) as Input, identity as Identity | undefined, pool as pg.Pool),
    );
}

const chatTypeDefs = gql`
  input HubChatCreateUserMessageInput {
    "1 to 500 characters, no control characters; stored and delivered as sent."
    body: String!
    "Chosen by the client: posting again with the same id answers the stored message."
    clientId: UUID!
  }
  type HubChatCreateUserMessageSuccess {
    chatMessage: HubChatMessage!
  }
  type HubChatUserMuted {
    message: String
  }
  type HubChatUserRateLimited {
    message: String
  }
  union HubChatCreateUserMessageResult = HubChatCreateUserMessageSuccess | HubChatUserMuted | HubChatUserRateLimited
  type HubChatCreateUserMessagePayload {
    result: HubChatCreateUserMessageResult!
  }
  input HubChatCreateSystemMessageInput {
    body: String!
    clientId: UUID!
    experienceId: UUID!
  }
  type HubChatCreateSystemMessagePayload {
    chatMessage: HubChatMessage!
  }
  input HubChatMuteUserInput {
    userId: UUID!
    "When the mute ends; null: when someone unmutes the player."
    expiredAt: Datetime
    reason: String
  }
  type HubChatMuteUserPayload {
    chatMute: HubChatMute!
  }
  input HubChatUnmuteUserInput {
    userId: UUID!
  }
  type HubChatUnmuteUserPayload {
    chatMute: HubChatMute!
  }
  input HubChatAddModInput {
    experienceId: UUID!
    userId: UUID!
  }
  type HubChatAddModPayload {
    chatMod: HubChatMod!
  }
  input HubChatRemoveModInput {
    experienceId: UUID!
    userId: UUID!
  }
  type HubChatRemoveModPayload {
    _: Boolean
  }
  input HubChatHideMessageInput {
    chatMessageId: UUID!
    "false shows the message again."
    hidden: Boolean! = true
  }
  type HubChatHideMessagePayload {
    chatMessage: HubChatMessage
  }
  type HubChatSubscriptionNewMessage {
    chatMessage: HubChatMessage!
    "This alert's place among the subscription's alerts: subscribe again with after: <the last cursor received> to receive what follows it."
    cursor: String!
  }
  type HubChatSubscriptionMuted {
    _: Boolean
    "This alert's place among the subscription's alerts: subscribe again with after: <the last cursor received> to receive what follows it."
    cursor: String!
  }
  type HubChatSubscriptionUnmuted {
    _: Boolean
    "This alert's place among the subscription's alerts: subscribe again with after: <the last cursor received> to receive what follows it."
    cursor: String!
  }
  union HubChatSubscriptionPayload = HubChatSubscriptionMuted | HubChatSubscriptionNewMessage | HubChatSubscriptionUnmuted
  extend input HubChatMessageCondition {
    "Get chat messages after a given ID"
    afterId: UUID
  }
  extend type Mutation {
    "Post to the chat of the session's experience (a player's session)."
    hubChatCreateUserMessage(input: HubChatCreateUserMessageInput!): HubChatCreateUserMessagePayload
    "Post a system message to an experience's chat (an operator API key)."
    hubChatCreateSystemMessage(input: HubChatCreateSystemMessageInput!): HubChatCreateSystemMessagePayload
    "Mute a player: a mod in the session's experience, an operator in every experience of the player's casino."
    hubChatMuteUser(input: HubChatMuteUserInput!): HubChatMuteUserPayload
    "End a player's mutes in force, where the caller may mute them."
    hubChatUnmuteUser(input: HubChatUnmuteUserInput!): HubChatUnmuteUserPayload
    "Make a player a mod of an experience's chat (an operator API key)."
    hubChatAddMod(input: HubChatAddModInput!): HubChatAddModPayload
    "Remove a mod (an operator API key)."
    hubChatRemoveMod(input: HubChatRemoveModInput!): HubChatRemoveModPayload
    "Hide a message from players, or show it again (an operator API key)."
    hubChatHideMessage(input: HubChatHideMessageInput!): HubChatHideMessagePayload
  }
  extend type Subscription {
    "New messages of the session's experience's chat, and the session player's own mutes and unmutes (a player's session). after: the last cursor received; the alerts since are delivered first."
    hubChatAlert(after: String): HubChatSubscriptionPayload
  }
`;

export const HubChatPlugin = extendSchema((build) => {
  const { hub_chat_message: messageResource, hub_chat_mod: modResource, hub_chat_mute: muteResource } = build.input.pgRegistry.pgResources;
  if (!messageResource || !modResource || !muteResource) {
    throw new Error("HubChatPlugin: hub.chat_message, hub.chat_mod or hub.chat_mute is missing from the schema (is the `hub` schema migrated?)");
  }
  const message = ($r: any) => messageResource.get({ id: access($r, "chatMessageId") });
  return {
    typeDefs: chatTypeDefs,
    objects: {
      Mutation: {
        plans: {
          hubChatCreateUserMessage: effect(async (input, identity, pool) => {
            const player = requirePlayer(identity, "hubChatCreateUserMessage");
            const body = checkChatBody(input.body, "hubChatCreateUserMessage");
            return { result: await dbCreateUserMessage(pool, player, body, String(input.clientId)) };
          }),
          hubChatCreateSystemMessage: effect(async (input, identity, pool) => {
            requireOperator(identity, "hubChatCreateSystemMessage");
            const body = checkChatBody(input.body, "hubChatCreateSystemMessage");
            return { chatMessageId: await dbCreateSystemMessage(pool, String(input.experienceId), body, String(input.clientId)) };
          }),
          hubChatMuteUser: effect(async (input, identity, pool) => {
            const who = await requireModerator(pool, identity, "hubChatMuteUser");
            const mute = { userId: String(input.userId), expiredAt: muteExpiry(input.expiredAt), reason: muteReason(input.reason) };
            return { chatMuteId: await dbMuteUser(pool, who, mute) };
          }),
          hubChatUnmuteUser: effect(async (input, identity, pool) => {
            const who = await requireModerator(pool, identity, "hubChatUnmuteUser");
            return { chatMuteId: await dbUnmuteUser(pool, who, String(input.userId)) };
          }),
          hubChatAddMod: effect(async (input, identity, pool) => {
            requireOperator(identity, "hubChatAddMod");
            return { chatMod: await dbAddMod(pool, String(input.experienceId), String(input.userId)) };
          }),
          hubChatRemoveMod: effect(async (input, identity, pool) => {
            requireOperator(identity, "hubChatRemoveMod");
            return { _: await dbRemoveMod(pool, String(input.experienceId), String(input.userId)) };
          }),
          hubChatHideMessage: effect(async (input, identity, pool) => {
            requireOperator(identity, "hubChatHideMessage");
            return { chatMessageId: await dbHideMessage(pool, String(input.chatMessageId), input.hidden !== false) };
          }),
        },
      },
      Subscription: {
        plans: {
          hubChatAlert: {
            subscribePlan: (_$root: any, fieldArgs: any) => {
              const $topic = lambda(
                [context().get("identity"), fieldArgs.getRaw("after")],
                ([identity, after]: readonly [Identity | undefined, unknown]) => {
                  const player = requirePlayer(identity, "hubChatAlert");
                  return resumeTopic(liveTopic.chat(player.user_id, player.casino_id, player.experience_id), afterArg(after, "hubChatAlert"));
                },
                true,
              );
              return listen(context().get("pgSubscriber"), $topic);
            },
            plan: ($event: any) => lambda($event, (e: unknown) => ({ ...(e as ChatAlert), __typename: ALERT_TYPENAME[(e as ChatAlert).kind] }), true),
          },
        },
      },
      HubChatCreateUserMessagePayload: { plans: { result: ($p: any) => access($p, "result") } },
      HubChatCreateUserMessageSuccess: { plans: { chatMessage: message } },
      HubChatCreateSystemMessagePayload: { plans: { chatMessage: message } },
      HubChatHideMessagePayload: { plans: { chatMessage: message } },
      HubChatSubscriptionNewMessage: { plans: { chatMessage: message } },
      HubChatMuteUserPayload: { plans: { chatMute: ($r: any) => muteResource.get({ id: access($r, "chatMuteId") }) } },
      HubChatUnmuteUserPayload: { plans: { chatMute: ($r: any) => muteResource.get({ id: access($r, "chatMuteId") }) } },
      // The row as the mutation wrote it, not read again: a removal committed in between would make this
      // non-null field null.
      HubChatAddModPayload: { plans: { chatMod: ($r: any) => pgSelectSingleFromRecord(modResource, access($r, "chatMod")) } },
    },
    inputObjects: {
      HubChatMessageCondition: {
        plans: {
          afterId(condition: any, value: unknown) {
            if (value === null || value === undefined) return;
            const { sql } = build;
            condition.where(sql`${condition.alias}.id > ${sqlValueWithCodec(value, TYPES.uuid)}`);
          },
        },
      },
    },
    unions: {
      HubChatCreateUserMessageResult: byTypename,
      HubChatSubscriptionPayload: byTypename,
    },
  } as any;
}, "HubChatPlugin");
