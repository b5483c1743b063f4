-- session_wait: take the dirty mask, or, when clean, register a long poll.
-- Atomic, so a mark lands either before (and is taken) or after (and wakes).
--
-- KEYS[1] mask     STRING dirty bitmap
-- KEYS[2] waiters  SET    wake channels of the nodes where a long poll waits
-- ARGV[1] this node's wake channel
-- ARGV[2] registration TTL (ms): the poll's remaining time plus a margin
-- returns the bitmap (now deleted) when dirty, false when clean (registered)
local m = redis.call('GETDEL', KEYS[1])
if m then
  return m
end
redis.call('SADD', KEYS[2], ARGV[1])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return false
