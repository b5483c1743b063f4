-- claim_restore.lua: give a holder back the claim a node saw it hold, for
-- what was left of it, unless somebody else has the name now or the holder
-- is revoked: what a node re-writes after a resubscription, so that a
-- Redis that lost its data hands nobody a name its guest still uses.
--
-- KEYS[1]  claim    STRING  the holder id, PX ttl   (prefix:{user:NAME}:claim)
-- KEYS[2]  revoked  ZSET    holder -> token expiry, unix ms
--                           (prefix:{user:NAME}:revoked)
-- ARGV[1]  holder   the holder id the node admitted
-- ARGV[2]  left     milliseconds the claim had left by the node's
--                   reckoning (integer >= 1)
-- ARGV[3]  now      the caller's clock, unix ms
-- ARGV[4]  channel  the registry's event channel (not a key: one for all users)
-- ARGV[5]  event    the "claimed" event to publish when the name was free
--
-- Returns 1 when the name was free and now holds ARGV[1] for `left` ms
-- (the event is published); 2 when it holds ARGV[1] already (its TTL is
-- raised to `left` if shorter, never lowered); 0 when another holder has
-- it; -1 when ARGV[1] is revoked (nothing changes in those two).
local revoked = redis.call('ZSCORE', KEYS[2], ARGV[1])
if revoked and tonumber(revoked) > tonumber(ARGV[3]) then
  return -1
end
local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
  redis.call('PUBLISH', ARGV[4], ARGV[5])
  return 1
end
if cur == ARGV[1] then
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return 2
end
return 0
