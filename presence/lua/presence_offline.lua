-- presence_offline: a user's connection to one node closed cleanly.
--
-- KEYS[1] user  HASH  node:<node> -> expiry (unix ms), rooms:<node> -> JSON,
--                     conns:<node> -> JSON, last_seen (unix ms)
-- ARGV[1] node id
-- ARGV[2] now (unix ms)
-- ARGV[3] retention (ms): the real expiry of KEYS[1]
-- returns {removed, live}: removed is 1 when the node held the user (its
-- claim is dropped and last_seen is now), 0 when it did not (nothing
-- changed); live is the number of nodes still holding the user
local now = tonumber(ARGV[2])
local exp = redis.call('HGET', KEYS[1], 'node:' .. ARGV[1])
local removed = 0
if exp then
  redis.call('HDEL', KEYS[1], 'node:' .. ARGV[1], 'rooms:' .. ARGV[1], 'conns:' .. ARGV[1])
  if tonumber(exp) > now then
    removed = 1
    redis.call('HSET', KEYS[1], 'last_seen', ARGV[2])
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
  end
end
local live = 0
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, 5) == 'node:' and tonumber(fields[i + 1]) > now then
    live = live + 1
  end
end
return {removed, live}
