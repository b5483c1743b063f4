-- nodes_lib: the registry's one way to drop the dead nodes, prepended to
-- node_heartbeat and nodes_list (scripts.go), so the two cannot drift.
--
-- drop_dead(beats, info, runs, now)
--   beats  ZSET  node id -> expiry (unix ms)
--   info   HASH  node id -> JSON node
--   runs   HASH  node id -> run id, "<id> fresh" -> its last fresh beat's id
--   now    unix ms, as a string or a number
-- Removes every node whose expiry is at or before now from the three keys.
local function drop_dead(beats, info, runs, now)
  local dead = redis.call('ZRANGEBYSCORE', beats, '-inf', now)
  if #dead > 0 then
    redis.call('HDEL', info, unpack(dead))
    redis.call('HDEL', runs, unpack(dead))
    for i = 1, #dead do
      dead[i] = dead[i] .. ' fresh'
    end
    redis.call('HDEL', runs, unpack(dead))
    redis.call('ZREMRANGEBYSCORE', beats, '-inf', now)
  end
end
