-- node_heartbeat: a node says it is alive.
--
-- KEYS[1] node beats  ZSET  node id -> expiry (unix ms)
-- KEYS[2] node info   HASH  node id -> JSON node
-- ARGV[1] node id
-- ARGV[2] expiry = now + TTL (unix ms)
-- ARGV[3] TTL (ms): when no node beats for a TTL, all are dead and both keys go
-- ARGV[4] JSON node
-- returns 1
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
