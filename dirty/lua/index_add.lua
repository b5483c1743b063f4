-- index_add: add or renew a member of a capped index scored by expiry,
-- dropping the members renewed longest ago when it holds more than max.
-- Used for a user's sessions ({user:U}:dirty:sessions, member = session)
-- and a user's follows ({user:U}:dirty:follows, member = topic).
--
-- KEYS[1] index  ZSET member -> expiry (unix ms)
-- ARGV[1] now (unix ms): members expiring at or before it are removed
-- ARGV[2] this member's expiry (unix ms)
-- ARGV[3] the index's own TTL (ms)
-- ARGV[4] max members kept (>= 1)
-- ARGV[5] the member
-- returns the members dropped to keep max, lowest expiry first ({} when
-- none), never ARGV[5]; expired members are removed without being returned
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[4])
if over <= 0 then
  return {}
end
-- one more than needed, in case ARGV[5] (written by a node whose clock is
-- behind) is among the lowest scores
local dropped = {}
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, over)) do
  if m ~= ARGV[5] and #dropped < over then
    dropped[#dropped + 1] = m
  end
end
-- ZREM in slices: unpack is limited to a few thousand values (an index
-- written before the cap, or under a larger one, may be that far over)
for i = 1, #dropped, 1000 do
  redis.call('ZREM', KEYS[1], unpack(dropped, i, math.min(i + 999, #dropped)))
end
return dropped
