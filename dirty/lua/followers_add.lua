-- followers_add: add a user to a topic's followers and keep the set alive
-- for another follow TTL, in one step, so the set never exists without a TTL.
--
-- KEYS[1] followers  SET users  ({topic:T}:followers)
-- ARGV[1] user
-- ARGV[2] follow TTL (ms)
-- returns 1
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
