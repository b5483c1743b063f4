-- lock_acquire.lua: take a free lock and issue its fence, in one round trip.
--
-- KEYS[1]  lock key   STRING  owner token, expires after ARGV[2] ms
-- KEYS[2]  fence key  STRING  INCR counter of fences issued (no TTL: it only grows)
-- ARGV[1]  token      this acquisition's owner token (128 random bits, hex)
-- ARGV[2]  ttl        lock lifetime in milliseconds (integer >= 1)
--
-- Returns the fence (integer >= 1) when the lock was free and now holds
-- ARGV[1]; the current fence when it already held ARGV[1] (an earlier try of
-- the same acquisition won but its reply was lost); nil when another token
-- holds it.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return tonumber(redis.call('GET', KEYS[2]))
end
return false
