-- ticket_submit.lua: enqueue a ticket unless one of its members has an
-- open ticket in the queue.
--
-- KEYS[1]  pool    ZSET  entry -> 0
-- KEYS[2]  age     ZSET  entry -> created ms
-- KEYS[3]  users   HASH  canonical user -> open ticket id
-- KEYS[4]  ticket  HASH  the new ticket
-- KEYS[5]  fresh   LIST  entries not yet seeded (queue_pick.lua takes them)
-- ARGV[1]  ticket id
-- ARGV[2]  entry (bucket, skill, size, id: see ticket.go)
-- ARGV[3]  created, Unix ms
-- ARGV[4]  keep: TTL in ms of the queue's keys and of a waiting ticket
-- ARGV[5]  user
-- ARGV[6]  party, space-separated ("" for none)
-- ARGV[7]  skill (decimal)
-- ARGV[8]  attributes, canonical JSON
-- ARGV[9..] the members' canonical names: user, then party
--
-- Returns {1, id} when enqueued; {2, id} when this very ticket was enqueued
-- already (a retried call: its hash exists, whatever became of it since);
-- {0, open id, user} when user already has another open ticket (nothing is
-- written).
--
-- A retry is found by the ticket's own hash, not by the user map: go-redis
-- sends a call again when its answer does not come in time (a stalled
-- Redis, or a node paused while it waited), and by then the first try's
-- ticket may have been matched, expired or cancelled, which frees its
-- members in the map. Found by the map alone, that retry queued the ended
-- ticket again, and a matched ticket was matched a second time.
local id = ARGV[1]
if redis.call('EXISTS', KEYS[4]) == 1 then
  return {2, id}
end
for i = 9, #ARGV do
  local open = redis.call('HGET', KEYS[3], ARGV[i])
  if open then
    return {0, open, ARGV[i]}
  end
end
for i = 9, #ARGV do
  redis.call('HSET', KEYS[3], ARGV[i], id)
end
redis.call('ZADD', KEYS[1], 0, ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
redis.call('RPUSH', KEYS[5], ARGV[2])
redis.call('HSET', KEYS[4], 'state', 'waiting', 'entry', ARGV[2], 'created', ARGV[3],
  'user', ARGV[5], 'party', ARGV[6], 'skill', ARGV[7], 'attrs', ARGV[8])
for i = 1, 5 do
  redis.call('PEXPIRE', KEYS[i], ARGV[4])
end
return {1, id}
