-- claim_acquire.lua: claim a free guest name for a holder, or renew the
-- claim when that holder has it already (a retried or repeated Claim,
-- the token-to-token handover of a second device). A revoked holder (it
-- signed out) gets nothing.
--
-- KEYS[1]  claim    STRING  the holder id, PX ttl   (prefix:{user:NAME}:claim)
-- KEYS[2]  revoked  ZSET    holder -> token expiry, unix ms
--                           (prefix:{user:NAME}:revoked)
-- ARGV[1]  holder   the claiming holder id
-- ARGV[2]  ttl      claim lifetime in milliseconds (integer >= 1)
-- ARGV[3]  now      the caller's clock, unix ms
-- ARGV[4]  channel  the registry's event channel (not a key: one for all users)
-- ARGV[5]  event    the "claimed" event to publish when the name was free
--
-- Returns {1} when the name was free and now holds ARGV[1] (the event is
-- published); {2} when it held ARGV[1] already (its TTL is reset); {0} when
-- another holder has it (nothing changes); {-1, until} when ARGV[1] is
-- revoked until `until` (nothing changes).
local revoked = redis.call('ZSCORE', KEYS[2], ARGV[1])
if revoked and tonumber(revoked) > tonumber(ARGV[3]) then
  return {-1, revoked}
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('PUBLISH', ARGV[4], ARGV[5])
  return {1}
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {2}
end
return {0}
