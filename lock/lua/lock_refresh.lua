-- lock_refresh.lua: reset the lock's TTL only if this owner still holds it.
--
-- KEYS[1]  lock key  STRING  owner token
-- ARGV[1]  token     the refreshing owner's token
-- ARGV[2]  ttl       new lifetime in milliseconds (integer >= 1)
--
-- Returns 1 when the lock held ARGV[1] and now expires ARGV[2] ms from now;
-- 0 when it had expired or holds another owner's token (nothing changes).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
