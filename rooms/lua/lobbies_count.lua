-- lobbies_count.lua: copy lobbies' seated counts, reported by their seat
-- scripts, into the global lobby index; a count older than the one indexed
-- (a lower stamp) is ignored, so counts arriving out of order cannot put an
-- older count back.
--
-- KEYS[1]  online  ZSET  lobby -> minus its seated users (most seated first)
-- KEYS[2]  info    HASH  lobby -> "<stamp> <rooms>" for each lobby in KEYS[1]
-- KEYS[3]  gone    ZSET  lobby -> stamp of the count of 0 that removed it
-- ARGV[1]  how long a tombstone in KEYS[3] is kept, µs
-- ARGV[2..]  lobby, seated users, rooms, stamp: quads (stamps as lobby_count
--            in lobby_lib.lua makes them, decimal µs)
--
-- Returns the number of counts applied. A lobby with 0 seated users leaves
-- KEYS[1] and KEYS[2] and is remembered in KEYS[3] (tombstones older than
-- ARGV[1] by this server's clock are trimmed).
local applied = 0
for i = 2, #ARGV - 3, 4 do
  local lobby, online, rooms, stamp = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], tonumber(ARGV[i + 3])
  local last = redis.call('ZSCORE', KEYS[3], lobby)
  local info = redis.call('HGET', KEYS[2], lobby)
  if info then
    last = string.match(info, '^%d+')
  end
  if not last or stamp >= tonumber(last) then
    if online > 0 then
      redis.call('ZADD', KEYS[1], -online, lobby)
      redis.call('HSET', KEYS[2], lobby, ARGV[i + 3] .. ' ' .. rooms)
      redis.call('ZREM', KEYS[3], lobby)
    else
      redis.call('ZREM', KEYS[1], lobby)
      redis.call('HDEL', KEYS[2], lobby)
      redis.call('ZADD', KEYS[3], ARGV[i + 3], lobby)
    end
    applied = applied + 1
  end
end
local t = redis.call('TIME')
local old = tonumber(t[1]) * 1000000 + tonumber(t[2]) - tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', string.format('%.0f', old))
return applied
