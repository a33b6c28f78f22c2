import { createExperience, createPlayer, createPlayerBalance, type TestServer } from "@hubpkg/hub/test";

export interface LivePlayer {
  userId: string;
  experienceId: string;
  casinoId: string;
  token: string;
}

/** A playground player with a HOUSE balance and a session, in a new experience or the one given (a live test's subscriber). */
export async function livePlayer(server: TestServer, uname: string, options: { experienceId?: string; amount: number }): Promise<LivePlayer> {
  const casinoId = server.playgroundCasinoId;
  const user = await createPlayer(server.dbPool, { casinoId, uname });
  const exp = options.experienceId ?? (await createExperience(server.dbPool, { casinoId, name: `exp-${uname}` })).id;
  await createPlayerBalance(server.dbPool, { userId: user.id, experienceId: exp, currencyKey: "HOUSE", amount: options.amount });
  const { token } = await server.authenticate(user.id, exp);
  return { userId: user.id, experienceId: exp, casinoId, token };
}
