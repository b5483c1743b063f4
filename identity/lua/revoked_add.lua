-- revoked_add.lua: record (again) that a holder is revoked until its
-- token expires: what a node re-writes after a resubscription from the
-- revocations it remembers, so that a Redis that lost its data learns
-- them back. Idempotent: a later expiry already recorded is kept.
--
-- KEYS[1]  revoked  ZSET  holder -> token expiry, unix ms
--                         (prefix:{user:NAME}:revoked)
-- ARGV[1]  holder   the revoked holder id
-- ARGV[2]  until    unix ms the revocation lasts until
-- ARGV[3]  now      the caller's clock, unix ms
--
-- Returns 1. The set is trimmed of the ended revocations and expires with
-- its latest one.
local now = tonumber(ARGV[3])
if tonumber(ARGV[2]) > now then
  redis.call('ZADD', KEYS[1], 'GT', ARGV[2], ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIREAT', KEYS[1], last[2])
end
return 1
