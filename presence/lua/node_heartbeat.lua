-- node_heartbeat: a node says it is alive, as one run (process) of its id.
--
-- KEYS[1] node beats  ZSET  node id -> expiry (unix ms)
-- KEYS[2] node info   HASH  node id -> JSON node
-- KEYS[3] node runs   HASH  node id -> run id of the process beating for it;
--                           "<id> fresh" -> the id of its last fresh beat
-- ARGV[1] node id
-- ARGV[2] expiry = now + TTL (unix ms)
-- ARGV[3] TTL (ms): when no node beats for a TTL, all are dead and the keys go
-- ARGV[4] JSON node
-- ARGV[5] now (unix ms)
-- ARGV[6] run id ("" = none)
-- ARGV[7] this beat's id (random, one per Heartbeat call)
-- ARGV[8..] the node's features (the JSON node's "features")
-- returns {fresh, runs, shared}: fresh is 1 when this run was not registered
-- live before this beat (its first beat, a beat after a lapse, another run
-- of the id, or a registry Redis lost): the node's presence claims must be
-- written again; runs are the run ids of the live nodes, this one included;
-- shared are the features of ARGV[8..] that every live node's JSON lists (a
-- node of v0.1.0 lists none, an entry that does not decode counts as none).
-- Dead nodes are dropped first, as nodes_list does (drop_dead, of nodes_lib
-- prepended), so the registry stays clean without a second script a beat.
local now = tonumber(ARGV[5])
drop_dead(KEYS[1], KEYS[2], KEYS[3], ARGV[5])
local prev = redis.call('ZSCORE', KEYS[1], ARGV[1])
local run = redis.call('HGET', KEYS[3], ARGV[1])
-- A beat that finds the lapse notes its id in the runs hash (field
-- "<id> fresh"): the same beat run again (the Redis client's retry of a
-- call whose answer was lost, after the first copy registered the run)
-- answers fresh too, or the node would not rewrite its claims.
local mark = ARGV[1] .. ' fresh'
local fresh = 0
if not prev or tonumber(prev) <= now or (run or '') ~= ARGV[6] then
  fresh = 1
  redis.call('HSET', KEYS[3], mark, ARGV[7])
else
  local at = redis.call('HGET', KEYS[3], mark)
  if at == ARGV[7] then
    fresh = 1
  elseif at then
    redis.call('HDEL', KEYS[3], mark)
  end
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[5], '+inf')
local runs = {}
local got = redis.call('HMGET', KEYS[3], unpack(live))
for i = 1, #got do
  if got[i] and got[i] ~= '' then
    runs[#runs + 1] = got[i]
  end
end
local shared = {}
if #ARGV > 7 then
  local lists = {}
  for i = 8, #ARGV do
    lists[ARGV[i]] = 0
  end
  local info = redis.call('HMGET', KEYS[2], unpack(live))
  for i = 1, #info do
    local ok, node = pcall(cjson.decode, info[i] or '')
    if ok and type(node) == 'table' and type(node.features) == 'table' then
      local seen = {}
      for _, f in ipairs(node.features) do
        if lists[f] and not seen[f] then
          seen[f] = true
          lists[f] = lists[f] + 1
        end
      end
    end
  end
  for i = 8, #ARGV do
    if lists[ARGV[i]] == #live then
      shared[#shared + 1] = ARGV[i]
      lists[ARGV[i]] = -1 -- once, however often it was asked
    end
  end
end
return {fresh, runs, shared}
