-- claim_touch.lua: renew a claim only if this session still holds it.
--
-- KEYS[1]  claim key  STRING  the holding session's id, PX ttl
-- ARGV[1]  session    the touching session's id
-- ARGV[2]  ttl        new lifetime in milliseconds (integer >= 1)
--
-- Returns 1 when the claim held ARGV[1] and now expires ARGV[2] ms from
-- now; 0 when it had expired, was released or holds another session
-- (nothing changes: a lost name is not taken back).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
