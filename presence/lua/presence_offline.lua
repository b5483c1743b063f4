-- presence_offline: a user's connection to one node closed cleanly.
--
-- KEYS[1] user nodes  ZSET  node -> expiry (unix ms)
-- KEYS[2] user info   HASH  last_seen (unix ms), rooms:<node> (JSON array)
-- ARGV[1] node id
-- ARGV[2] now (unix ms)
-- ARGV[3] retention (ms): the real expiry of KEYS[2]
-- returns {removed, live}: removed is 1 when the node held the user (and
-- last_seen was set to now), 0 when it did not (nothing changed); live is the
-- number of nodes still holding the user
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
if removed == 1 then
  redis.call('HDEL', KEYS[2], 'rooms:' .. ARGV[1])
  redis.call('HSET', KEYS[2], 'last_seen', ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
local live = redis.call('ZCOUNT', KEYS[1], '(' .. ARGV[2], '+inf')
return {removed, live}
