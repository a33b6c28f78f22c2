/** Row types of the hub's tables, as `pg` returns them. */
export interface DbCasino {
  id: string;
  name: string;
  base_url: string | null;
  is_playground: boolean;
  created_at: Date;
}

export interface DbUser {
  id: string;
  casino_id: string;
  uname: string;
  created_at: Date;
}

export interface DbExperience {
  id: string;
  casino_id: string;
  name: string;
  created_at: Date;
  /** The id a playground client chose for it (hubCreatePlaygroundSession); null otherwise. */
  client_id: string | null;
}

export interface DbSession {
  id: string;
  user_id: string;
  casino_id: string;
  experience_id: string;
  created_at: Date;
  expired_at: Date;
  revoked_at: Date | null;
}

export interface DbApiKey {
  id: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

export interface DbCurrency {
  key: string;
  casino_id: string;
  display_unit_name: string;
  display_unit_scale: number;
}

export interface DbBalance {
  id: string;
  user_id: string;
  casino_id: string;
  experience_id: string;
  currency_key: string;
  amount: number;
}

export interface DbBankroll {
  id: string;
  casino_id: string;
  currency_key: string;
  amount: number;
  /** bigint: pg returns it as a string to keep precision. */
  bets: string;
  wagered: number;
  expected_value: number;
}
