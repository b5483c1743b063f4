-- party_accept.lua: record one invitee's acceptance of a pending party,
-- and queue the party's ticket once every invitee has accepted.
--
-- KEYS[1]  pool     ZSET  entry -> 0
-- KEYS[2]  age      ZSET  entry -> created ms
-- KEYS[3]  users    HASH  canonical user -> open ticket id
-- KEYS[4]  ticket   HASH  the pending party's ticket
-- KEYS[5]  fresh    LIST  entries not yet seeded (queue_pick.lua takes them)
-- KEYS[6]  pending  ZSET  pending party ticket id -> invitations' deadline ms
-- KEYS[7]  outbox   ZSET  "x:TICKET" -> ms: an expiry to announce
-- ARGV[1]  ticket id
-- ARGV[2]  the accepting user's canonical name
-- ARGV[3]  now, Unix ms
-- ARGV[4]  keep: TTL in ms of the queue's keys and of a waiting ticket
-- ARGV[5]  status TTL in ms: how long an ended ticket is kept
--
-- Returns {} when there is no such ticket or the user is not one of its
-- invitees (the same answer: nobody learns of a party they are not in);
-- {0, fields} when the ticket is not pending (queued, ended, or its
-- invitations' deadline passed: it is expired now, and "x:ID" joins the
-- outbox); {1, fields} when the acceptance is recorded (the ticket is
-- waiting in the queue if it was the last one); {3, fields} when this
-- user's acceptance was recorded before and the party has queued (waiting
-- or matched): a retry, answered as the acceptance it repeats;
-- {2, open id, user} when
-- it was the last and a member has an open ticket in the queue (nothing
-- is written). fields is the ticket's HGETALL after the call.
--
-- The user map is keyed by canonical name: string.lower is
-- names.Canonical on the names' alphabet.
local id, who, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local t = redis.call('HMGET', KEYS[4], 'state', 'entry', 'user', 'party', 'accepted', 'expires')
if not t[1] then
  return {}
end
local invited = {}
for m in string.gmatch(t[4] or '', '%S+') do
  invited[#invited + 1] = string.lower(m)
end
local member = false
for _, m in ipairs(invited) do
  if m == who then
    member = true
  end
end
if not member then
  return {}
end
if t[1] ~= 'pending' then
  -- The acceptance of this user that queued the party (or one before it),
  -- asked again: the Redis client's retry of a call whose answer was lost,
  -- or the user's own repeat. It stands, as it was recorded.
  if t[1] == 'waiting' or t[1] == 'matched' then
    for m in string.gmatch(t[5] or '', '%S+') do
      if m == who then
        return {3, redis.call('HGETALL', KEYS[4])}
      end
    end
  end
  return {0, redis.call('HGETALL', KEYS[4])}
end
if (tonumber(t[6]) or 0) <= now then
  redis.call('HSET', KEYS[4], 'state', 'expired', 'ended', ARGV[3])
  redis.call('PEXPIRE', KEYS[4], ARGV[5])
  redis.call('ZREM', KEYS[6], id)
  redis.call('ZADD', KEYS[7], now, 'x:' .. id)
  return {0, redis.call('HGETALL', KEYS[4])}
end
local accepted, seen = {}, {}
for m in string.gmatch(t[5] or '', '%S+') do
  accepted[#accepted + 1] = m
  seen[m] = true
end
if not seen[who] then
  accepted[#accepted + 1] = who
  seen[who] = true
end
local all = true
for _, m in ipairs(invited) do
  if not seen[m] then
    all = false
  end
end
if not all then
  redis.call('HSET', KEYS[4], 'accepted', table.concat(accepted, ' '))
  return {1, redis.call('HGETALL', KEYS[4])}
end
-- Every invitee agreed: queue the ticket as ticket_submit.lua would, its
-- wait counted from now.
local members = {string.lower(t[3])}
for _, m in ipairs(invited) do
  members[#members + 1] = m
end
for _, m in ipairs(members) do
  local open = redis.call('HGET', KEYS[3], m)
  if open and open ~= id then
    return {2, open, m}
  end
end
for _, m in ipairs(members) do
  redis.call('HSET', KEYS[3], m, id)
end
redis.call('ZADD', KEYS[1], 0, t[2])
redis.call('ZADD', KEYS[2], now, t[2])
redis.call('RPUSH', KEYS[5], t[2])
redis.call('ZREM', KEYS[6], id)
redis.call('HSET', KEYS[4], 'state', 'waiting', 'created', ARGV[3], 'accepted', table.concat(accepted, ' '))
redis.call('HDEL', KEYS[4], 'expires')
for i = 1, 5 do
  redis.call('PEXPIRE', KEYS[i], ARGV[4])
end
return {1, redis.call('HGETALL', KEYS[4])}
