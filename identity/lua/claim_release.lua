-- claim_release.lua: sign a holder out: free the name if this holder has
-- it, and revoke the holder until its token expires, so that its tokens
-- never take the name back (claim_admit.lua); then tell every node.
--
-- KEYS[1]  claim    STRING  the holder id, PX ttl   (prefix:{user:NAME}:claim)
-- KEYS[2]  revoked  ZSET    holder -> token expiry, unix ms
--                           (prefix:{user:NAME}:revoked)
-- ARGV[1]  holder   the signing-out holder id
-- ARGV[2]  until    unix ms until which the holder stays revoked (the
--                   token's expiry); at or before now, nothing is recorded
-- ARGV[3]  now      the caller's clock, unix ms
-- ARGV[4]  channel  the registry's event channel (not a key: one for all users)
-- ARGV[5]  event    the "signed_out" event, published in every case
--
-- Returns 1 when the claim held ARGV[1] and is deleted; 0 when it had
-- expired or holds another holder (nothing is deleted). Either way the
-- holder is revoked. The revoked set is trimmed of the ended revocations
-- and expires with its latest one.
local now = tonumber(ARGV[3])
local released = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  released = 1
end
if tonumber(ARGV[2]) > now then
  redis.call('ZADD', KEYS[2], 'GT', ARGV[2], ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIREAT', KEYS[2], last[2])
end
redis.call('PUBLISH', ARGV[4], ARGV[5])
return released
