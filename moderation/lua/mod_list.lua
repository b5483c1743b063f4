-- mod_list.lua: trim the mute and ban indexes of entries past their end,
-- and read what is left.
--
-- KEYS[1]  mute index    ZSET  user -> until, unix ms
-- KEYS[2]  mute reasons  HASH  user -> reason
-- KEYS[3]  ban index     ZSET  user -> until, unix ms
-- KEYS[4]  ban reasons   HASH  user -> reason
-- ARGV[1]  now, unix ms: entries with until <= now are removed
--
-- Returns {{user, until, reason, ...} of mutes, {...} of bans}, soonest end
-- first.
local out = {}
for k = 1, 3, 2 do
  local gone = redis.call('ZRANGEBYSCORE', KEYS[k], '-inf', ARGV[1])
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[k], '-inf', ARGV[1])
    for i = 1, #gone, 1000 do
      redis.call('HDEL', KEYS[k + 1], unpack(gone, i, math.min(i + 999, #gone)))
    end
  end
  local list = {}
  local live = redis.call('ZRANGE', KEYS[k], 0, -1, 'WITHSCORES')
  for i = 1, #live, 2 do
    list[#list + 1] = live[i]
    list[#list + 1] = live[i + 1]
    list[#list + 1] = redis.call('HGET', KEYS[k + 1], live[i]) or ''
  end
  out[#out + 1] = list
end
return out
