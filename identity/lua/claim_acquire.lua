-- claim_acquire.lua: claim a free guest name for a session, or renew the
-- claim when that session holds it already (a retried or repeated Claim).
--
-- KEYS[1]  claim key  STRING  the holding session's id, PX ttl
-- ARGV[1]  session    the claiming session's id
-- ARGV[2]  ttl        claim lifetime in milliseconds (integer >= 1)
--
-- Returns 1 when the name was free and now holds ARGV[1]; 2 when it held
-- ARGV[1] already (its TTL is reset); 0 when another session holds it
-- (nothing changes).
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 2
end
return 0
