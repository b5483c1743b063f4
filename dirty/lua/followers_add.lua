-- followers_add: add a user to a topic's followers and keep the set alive
-- for another follow TTL, in one step, so the set never exists without a TTL.
--
-- KEYS[1] followers  SET users  ({topic:T}:followers)
-- ARGV[1] user
-- ARGV[2] follow TTL (ms)
-- ARGV[3] "1" when the TTL may only lengthen the set's life (a guest's
--         follow: a new set lives ARGV[2], an existing one keeps a longer
--         expiry), "0" to set it
-- returns 1
redis.call('SADD', KEYS[1], ARGV[1])
local left = redis.call('PTTL', KEYS[1])
if ARGV[3] ~= '1' or left < 0 or left < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
