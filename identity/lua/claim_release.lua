-- claim_release.lua: free a name only if this session holds it.
--
-- KEYS[1]  claim key  STRING  the holding session's id, PX ttl
-- ARGV[1]  session    the releasing session's id
--
-- Returns 1 when the claim held ARGV[1] and is now deleted; 0 when it had
-- expired or holds another session (nothing is deleted).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
