-- GET /bets lists one player's bets of one experience, newest first, a page at
-- a time (id < the cursor): with these indexes each page reads only its rows.
create index coinflip_user_experience_id on app.coinflip (user_id, experience_id, id);
create index coinflip_bet_user_experience_id on app.coinflip_bet (user_id, experience_id, id);
