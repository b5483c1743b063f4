-- ticket_cancel.lua: take a waiting ticket out of the queue, or dissolve
-- a pending party, as cancelled.
--
-- KEYS[1]  pool    ZSET  entry -> 0
-- KEYS[2]  age     ZSET  entry -> created ms
-- KEYS[3]  users   HASH  canonical user -> open ticket id
-- KEYS[4]  ticket  HASH  the ticket
-- KEYS[5]  pending ZSET  pending party ticket id -> invitations' deadline ms
-- ARGV[1]  ticket id
-- ARGV[2]  now, Unix ms
-- ARGV[3]  status TTL in ms: how long the ended ticket is kept
--
-- Returns {1, fields} when the ticket was waiting or pending and is now
-- cancelled;
-- {0, fields} when it had ended already (matched, expired or cancelled:
-- nothing is written); {} when there is no such ticket. fields is the
-- ticket's HGETALL after the call.
local t = redis.call('HMGET', KEYS[4], 'state', 'entry', 'user', 'party')
if not t[1] then
  return {}
end
local changed = 0
if t[1] == 'waiting' then
  changed = 1
  redis.call('ZREM', KEYS[1], t[2])
  redis.call('ZREM', KEYS[2], t[2])
  local members = {t[3]}
  for m in string.gmatch(t[4] or '', '%S+') do
    members[#members + 1] = m
  end
  -- The user map is keyed by canonical name (string.lower is
  -- names.Canonical on the names' alphabet); tickets written before it
  -- was are keyed as typed.
  for _, m in ipairs(members) do
    for _, u in ipairs({string.lower(m), m}) do
      if redis.call('HGET', KEYS[3], u) == ARGV[1] then
        redis.call('HDEL', KEYS[3], u)
      end
    end
  end
  redis.call('HSET', KEYS[4], 'state', 'cancelled', 'ended', ARGV[2])
  redis.call('PEXPIRE', KEYS[4], ARGV[3])
elseif t[1] == 'pending' then
  -- A pending party is in no queue index, only in the pending one.
  changed = 1
  redis.call('ZREM', KEYS[5], ARGV[1])
  redis.call('HSET', KEYS[4], 'state', 'cancelled', 'ended', ARGV[2])
  redis.call('PEXPIRE', KEYS[4], ARGV[3])
end
return {changed, redis.call('HGETALL', KEYS[4])}
