
insert into hub.casino (name, is_playground) values ('playground', true)
  on conflict (name) do nothing;
insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale)
  select 'HOUSE', id, 'house units', 1 from hub.casino where name = 'playground'
  on conflict do nothing;
