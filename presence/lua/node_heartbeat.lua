-- node_heartbeat: a node says it is alive, as one run (process) of its id.
--
-- KEYS[1] node beats  ZSET  node id -> expiry (unix ms)
-- KEYS[2] node info   HASH  node id -> JSON node
-- KEYS[3] node runs   HASH  node id -> run id of the process beating for it
-- ARGV[1] node id
-- ARGV[2] expiry = now + TTL (unix ms)
-- ARGV[3] TTL (ms): when no node beats for a TTL, all are dead and the keys go
-- ARGV[4] JSON node
-- ARGV[5] now (unix ms)
-- ARGV[6] run id ("" = none)
-- returns {fresh, runs}: fresh is 1 when this run was not registered live
-- before this beat (its first beat, a beat after a lapse, another run of
-- the id, or a registry Redis lost): the node's presence claims must be
-- written again; runs are the run ids of the live nodes, this one included
local now = tonumber(ARGV[5])
local prev = redis.call('ZSCORE', KEYS[1], ARGV[1])
local run = redis.call('HGET', KEYS[3], ARGV[1])
local fresh = 0
if not prev or tonumber(prev) <= now or (run or '') ~= ARGV[6] then
  fresh = 1
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
return {fresh, runs}
