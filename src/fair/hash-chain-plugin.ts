/**
 * hubCreateHashChain and hubRevealHashChain. The tables themselves (HubHashChain,
 * HubHash, hubHashChainById, hubHashById, HubHashChain.preimageHash,
 * HubUser.activeHashChain) come from the schema, under row-level security.
 */
import { access, constant, context, lambda, sideEffect } from "grafast";
import { extendSchema, gql } from "graphile-utils";
import type { Identity } from "../auth/identity.js";
import { ErrorCode } from "../errors.js";
import { clientError } from "../graphql/client-error.js";
import { dbCreateHubHashChain, dbRevealHubHashChain, DEFAULT_HASH_CHAIN_LENGTH } from "./db.js";
import { MAX_CHAIN_CREATIONS_PER_PLAYER } from "./chain-secret.js";
import { serverOfBuild } from "../server-state.js";

declare global {
  namespace GraphileBuild {
    interface Build {
      /** Hashes per new chain, set by HubGameConfigPlugin({ hashChainLength }). */
      hubHashChainLength?: number;
    }
  }
}

export function requirePlayer(identity: Identity | undefined) {
  if (identity?.kind !== "user") throw clientError(identity ? ErrorCode.FORBIDDEN : ErrorCode.UNAUTHENTICATED, "Unauthorized: this operation needs a player's session.");
  return identity.session;
}

export const HubHashChainPlugin = extendSchema((build) => {
  const { hub_hash_chain: chainResource, hub_hash: hashResource } = build.input.pgRegistry.pgResources;
  if (!chainResource || !hashResource) throw new Error("HubHashChainPlugin: hub.hash_chain or hub.hash is missing from the schema (is the `hub` schema migrated?)");
  // This server's creations in progress, worker threads and segment cache.
  const { chains } = serverOfBuild(build);
  return {
    typeDefs: gql`
      type HubCreateHashChainPayload {
        "The new active chain; its TERMINAL hash (iteration maxIteration) is the commitment."
        hashChain: HubHashChain!
      }
      input HubRevealHashChainInput {
        hashChainId: UUID!
      }
      type HubRevealHashChainPayload {
        "The seed h(0) (kind PREIMAGE, iteration 0): hashing it maxIteration times gives the terminal hash."
        preimageHash: HubHash!
      }
      extend type HubUser {
        "This user's active hash chain in the current session's casino and experience; null without one, or without a player's session."
        activeHashChain: HubHashChain
      }
      extend type Mutation {
        """
        A new hash chain for the player in this casino and experience; the previous
        active one is retired (it can still be revealed). Needs a player's session.
        """
        hubCreateHashChain: HubCreateHashChainPayload!
        """
        End one of the player's chains and publish its seed, which proves every
        hash it revealed. Revealing again returns the same preimage.
        """
        hubRevealHashChain(input: HubRevealHashChainInput!): HubRevealHashChainPayload!
      }
    `,
    objects: {
      Mutation: {
        plans: {
          hubCreateHashChain() {
            const length = build.hubHashChainLength ?? DEFAULT_HASH_CHAIN_LENGTH;
            const $identity = context().get("identity");
            const $pool = context().get("superuserPool");
            return sideEffect([$identity, $pool], async ([identity, pool]) => {
              const session = requirePlayer(identity);
              const release = chains.reserveCreation(session.user_id);
              if (!release) {
                throw clientError(
                  ErrorCode.TOO_MANY_REQUESTS,
                  `hubCreateHashChain: this player already has ${MAX_CHAIN_CREATIONS_PER_PLAYER} hash chains being created (at most ${MAX_CHAIN_CREATIONS_PER_PLAYER} at once); this one was refused. Retry once one of them has been answered.`,
                );
              }
              try {
                const { hashChain } = await dbCreateHubHashChain(pool, {
                  userId: session.user_id,
                  casinoId: session.casino_id,
                  experienceId: session.experience_id,
                  maxIteration: length,
                }, chains);
                return { hashChainId: hashChain.id };
              } finally {
                release();
              }
            });
          },
          hubRevealHashChain(_parent, fieldArgs) {
            const $input = fieldArgs.getRaw("input");
            const $identity = context().get("identity");
            const $pool = context().get("superuserPool");
            return sideEffect([$input, $identity, $pool], async ([input, identity, pool]) => {
              const session = requirePlayer(identity);
              const { hashChainId } = input as { hashChainId: string };
              const preimage = await dbRevealHubHashChain(pool, {
                userId: session.user_id,
                casinoId: session.casino_id,
                experienceId: session.experience_id,
                hashChainId,
              }, chains);
              if (!preimage) {
                throw clientError(
                  ErrorCode.HASH_CHAIN_NOT_FOUND,
                  `hubRevealHashChain: no hash chain ${hashChainId} of this player in this casino and experience.`,
                );
              }
              return { hashId: preimage.id };
            });
          },
        },
      },
      HubUser: {
        plans: {
          activeHashChain($user: any) {
            const $session = lambda(context().get("identity"), (identity: Identity | undefined) => (identity?.kind === "user" ? identity.session : null), true);
            return chainResource
              .find({
                user_id: $user.get("id"),
                active: constant(true),
                casino_id: lambda($session, (s) => s?.casino_id ?? null, true),
                experience_id: lambda($session, (s) => s?.experience_id ?? null, true),
              })
              .single();
          },
        },
      },
      HubCreateHashChainPayload: {
        plans: {
          hashChain: ($result: any) => chainResource.get({ id: access($result, "hashChainId") }),
        },
      },
      HubRevealHashChainPayload: {
        plans: {
          preimageHash: ($result: any) => hashResource.get({ id: access($result, "hashId") }),
        },
      },
    },
  };
}, "HubHashChainPlugin");
