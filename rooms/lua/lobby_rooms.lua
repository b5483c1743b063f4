-- lobby_rooms.lua: every room of a lobby with its live members (read only).
--
-- KEYS[1]  rooms  ZSET  every room number of the lobby
-- KEYS[2]  seats  prefix of the rooms' seat ZSETs (lobby hash tag)
-- ARGV[1]  now, unix ms
--
-- Returns {room number, {live members}, room number, {live members}, ...},
-- lowest room number first.
local out = {}
for _, seq in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  out[#out + 1] = seq
  out[#out + 1] = redis.call('ZRANGEBYSCORE', KEYS[2] .. seq, '(' .. ARGV[1], '+inf')
end
return out
