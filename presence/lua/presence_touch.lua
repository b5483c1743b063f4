-- presence_touch: one user is connected to one node; renew it.
--
-- KEYS[1] user nodes  ZSET  node -> expiry (unix ms)
-- KEYS[2] user info   HASH  last_seen (unix ms), rooms:<node> (JSON array)
-- ARGV[1] node id
-- ARGV[2] now (unix ms)
-- ARGV[3] expiry = now + TTL (unix ms)
-- ARGV[4] TTL (ms): the real expiry of KEYS[1]
-- ARGV[5] retention (ms): the real expiry of KEYS[2], so last_seen outlives the TTL
-- ARGV[6] rooms: JSON array of room ids
-- returns 1
local node, now = ARGV[1], ARGV[2]

-- forget the rooms of nodes that stopped renewing this user
if redis.call('EXISTS', KEYS[1]) == 0 then
  -- offline until now: every rooms field is stale (rare: a user coming back)
  for _, f in ipairs(redis.call('HKEYS', KEYS[2])) do
    if string.sub(f, 1, 6) == 'rooms:' then
      redis.call('HDEL', KEYS[2], f)
    end
  end
else
  local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
  if #dead > 0 then
    for _, n in ipairs(dead) do
      redis.call('HDEL', KEYS[2], 'rooms:' .. n)
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  end
end

redis.call('ZADD', KEYS[1], ARGV[3], node)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('HSET', KEYS[2], 'rooms:' .. node, ARGV[6], 'last_seen', ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return 1
