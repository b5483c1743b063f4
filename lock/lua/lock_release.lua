-- lock_release.lua: delete the lock only if this owner still holds it.
--
-- KEYS[1]  lock key  STRING  owner token
-- ARGV[1]  token     the releasing owner's token
--
-- Returns 1 when the lock held ARGV[1] and is now deleted; 0 when it had
-- expired or holds another owner's token (nothing is deleted).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
