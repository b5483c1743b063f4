-- lock_pttl.lua: the lock's remaining lifetime, as seen by one owner.
--
-- KEYS[1]  lock key  STRING  owner token
-- ARGV[1]  token     the asking owner's token
--
-- Returns the remaining TTL in milliseconds when the lock holds ARGV[1];
-- -3 when it had expired or holds another owner's token.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PTTL', KEYS[1])
end
return -3
