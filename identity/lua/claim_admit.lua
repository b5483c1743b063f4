-- claim_admit.lua: admit a request (or a WebSocket open) of a guest token:
-- renew the holder's claim, or take the name back for it when the name is
-- free (Redis lost its data, or the claim ran out while nobody took the
-- name), unless the holder signed out or another holder has the name.
--
-- KEYS[1]  claim    STRING  the holder id, PX ttl   (prefix:{user:NAME}:claim)
-- KEYS[2]  revoked  ZSET    holder -> token expiry, unix ms
--                           (prefix:{user:NAME}:revoked)
-- ARGV[1]  holder   the token's holder id
-- ARGV[2]  ttl      claim lifetime in milliseconds (integer >= 1)
-- ARGV[3]  now      the caller's clock, unix ms
-- ARGV[4]  channel  the registry's event channel (not a key: one for all users)
-- ARGV[5]  event    the "claimed" event to publish when the name is taken back
--
-- Returns {1} when ARGV[1] held the claim (renewed for ttl); {2} when the
-- name was free and now holds ARGV[1] for ttl (the event is published);
-- {0} when another holder has the name (nothing changes); {-1, until}
-- when ARGV[1] is revoked until `until` (nothing changes).
local revoked = redis.call('ZSCORE', KEYS[2], ARGV[1])
if revoked and tonumber(revoked) > tonumber(ARGV[3]) then
  return {-1, revoked}
end
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1}
end
if not cur then
  -- NX although the script saw no claim: SET NX is the whole rule.
  redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
  redis.call('PUBLISH', ARGV[4], ARGV[5])
  return {2}
end
return {0}
