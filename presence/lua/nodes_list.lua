-- nodes_list: the live nodes of the registry; drops the dead ones.
--
-- KEYS[1] node beats  ZSET  node id -> expiry (unix ms)
-- KEYS[2] node info   HASH  node id -> JSON node
-- KEYS[3] node runs   HASH  node id -> run id
-- ARGV[1] now (unix ms)
-- returns the JSON of every live node, in node id order
-- Run with nodes_lib prepended (drop_dead).
local now = ARGV[1]
drop_dead(KEYS[1], KEYS[2], KEYS[3], now)
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
