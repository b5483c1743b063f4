-- session_mark: make sections of a live session dirty and wake its long polls.
--
-- KEYS[1] owner    STRING user id; exists while the session lives
-- KEYS[2] mask     STRING dirty bitmap
-- KEYS[3] waiters  SET    wake channels of the nodes where a long poll waits
-- ARGV[1] session TTL (ms)
-- ARGV[2] session id: the wake message
-- ARGV[3..] bit offsets to set
-- returns 1 when marked, 0 when the session is not live (nothing written)
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
for i = 3, #ARGV do
  redis.call('SETBIT', KEYS[2], ARGV[i], 1)
end
redis.call('PEXPIRE', KEYS[2], ARGV[1])
-- one wake per waiting registration: a storm of marks publishes once, and
-- the woken poll registers again if it still finds nothing
local chans = redis.call('SMEMBERS', KEYS[3])
if #chans > 0 then
  for _, ch in ipairs(chans) do
    redis.call('PUBLISH', ch, ARGV[2])
  end
  redis.call('DEL', KEYS[3])
end
return 1
