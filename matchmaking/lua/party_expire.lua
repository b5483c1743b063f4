-- party_expire.lua: expire the pending parties whose invitations'
-- deadline passed, for the holder's next drain to announce.
--
-- KEYS[1]  pending  ZSET  pending party ticket id -> invitations' deadline ms
-- KEYS[2]  outbox   ZSET  "x:TICKET" -> ms: an expiry to announce
-- KEYS[3..] the tickets, in the order of ARGV[3..]
-- ARGV[1]  now, Unix ms
-- ARGV[2]  status TTL in ms: how long an ended ticket is kept
-- ARGV[3..] the ticket ids (read from pending before the call)
--
-- Returns the number of parties expired. A ticket no longer pending
-- (accepted, declined, cancelled, or gone) only leaves the pending index.
local n = 0
for i = 3, #ARGV do
  local id, key = ARGV[i], KEYS[i]
  local t = redis.call('HMGET', key, 'state', 'expires')
  if t[1] == 'pending' then
    if (tonumber(t[2]) or 0) <= tonumber(ARGV[1]) then
      redis.call('HSET', key, 'state', 'expired', 'ended', ARGV[1])
      redis.call('PEXPIRE', key, ARGV[2])
      redis.call('ZADD', KEYS[2], ARGV[1], 'x:' .. id)
      redis.call('ZREM', KEYS[1], id)
      n = n + 1
    end
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return n
