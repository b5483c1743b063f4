-- lobbies_top.lua: the lobbies with the most seated users (read only).
--
-- KEYS[1]  online  ZSET  lobby -> minus its seated users
-- KEYS[2]  info    HASH  lobby -> "<stamp> <rooms>"
-- ARGV[1]  most lobbies to return (>= 1)
--
-- Returns {lobby, seated users, rooms, ...}, most seated first, ties by name.
local top = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
local out = {}
for i = 1, #top, 2 do
  local info = redis.call('HGET', KEYS[2], top[i]) or ''
  out[#out + 1] = top[i]
  out[#out + 1] = -tonumber(top[i + 1])
  out[#out + 1] = tonumber(string.match(info, ' (%d+)$') or '0')
end
return out
