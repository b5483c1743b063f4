-- fence_hset.lua: HSET guarded by a lock's fence. Run with lock.FenceCheckLua
-- (lua/fence_check.lua) prepended.
--
-- KEYS[1]  fence key  STRING  INCR counter of fences issued
-- KEYS[2]  hash key   HASH    the protected hash (same hash tag as KEYS[1])
-- ARGV[1]  fence      the writer's fence number (decimal)
-- ARGV[2..] field, value, field, value, ...
--
-- Returns the number of fields added (as HSET does); -1, writing nothing,
-- when a newer fence was issued.
if not fence_is_current(KEYS[1], ARGV[1]) then
  return -1
end
return redis.call('HSET', KEYS[2], unpack(ARGV, 2))
