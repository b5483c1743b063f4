-- session_wait: take the dirty mask, or, for a long poll that finds it
-- clean, register the poll. Take runs it too, registering nothing.
-- Atomic, so a mark lands either before (and is taken) or after (and wakes).
--
-- Safe to run twice with the same KEYS and ARGV (go-redis sends a call again
-- when its reply is late, and the first copy may have run): a take records
-- the mask it took under the call's own key, and a second run answers that
-- record and changes nothing, however many marks landed in between. A clean
-- answer is not recorded (that would cost a key per clean poll): its second
-- run registers the same channel again (SADD, PEXPIRE only lengthening) or,
-- when a mark landed in between, takes and records that mark, which the
-- caller then gets instead of the lost clean answer.
--
-- KEYS[1] mask     STRING dirty bitmap
-- KEYS[2] waiters  SET    wake channels of the nodes where a long poll waits
-- KEYS[3] taken    STRING this call's record: the bitmap it took
-- ARGV[1] this node's wake channel; "" for a Take, which registers nothing
-- ARGV[2] registration TTL (ms): the poll's remaining time plus a margin
-- ARGV[3] record TTL (ms)
-- returns the bitmap (now deleted) when dirty, or the one this call took
-- before; false when clean (registered when ARGV[1] is not "")
local taken = redis.call('GET', KEYS[3])
if taken then
  return taken
end
local m = redis.call('GETDEL', KEYS[1])
if m then
  redis.call('SET', KEYS[3], m, 'PX', ARGV[3])
  return m
end
if ARGV[1] == '' then
  return false
end
redis.call('SADD', KEYS[2], ARGV[1])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return false
