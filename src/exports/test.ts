export {
  startTestServer,
  createGraphQLClient,
  ClientError,
  createCasino,
  createCurrency,
  createExperience,
  createPlayer,
  createPlayerBalance,
  getPlayerBalance,
  createHouseBankroll,
  getHouseBankroll,
  type TestServer,
  type TestServer as HubTestServer,
  type TestServerOptions,
  type GraphQLClient,
  type GraphQLResponse,
} from "../test-kit/index.js";
export { createHashChain, getNextHash, clientSeedForOutcome } from "../test-kit/hash-chain.js";
export { postChatMessage, postSystemChatMessage, readChatMessages, type ChatMessage, type PostChatMessageResult } from "../test-kit/chat.js";
