-- nodes_list: the live nodes of the registry; drops the dead ones.
--
-- KEYS[1] node beats  ZSET  node id -> expiry (unix ms)
-- KEYS[2] node info   HASH  node id -> JSON node
-- KEYS[3] node runs   HASH  node id -> run id
-- ARGV[1] now (unix ms)
-- returns the JSON of every live node, in node id order
local now = ARGV[1]
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, id in ipairs(dead) do
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
end
if #dead > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
end
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
if #live == 0 then
  return {}
end
table.sort(live)
local out = {}
local info = redis.call('HMGET', KEYS[2], unpack(live))
for i = 1, #live do
  if info[i] then
    out[#out + 1] = info[i]
  end
end
return out
