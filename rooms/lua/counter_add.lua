-- counter_add.lua: add to a counter once per token, so that a pipeline
-- Redis runs twice (a client's retry after a timeout) adds once.
--
-- KEYS[1]  counter  STRING  INCRBY
-- KEYS[2]  token    STRING  present once the token's amount was added (same slot)
-- ARGV[1]  amount (may be negative)
-- ARGV[2]  how long the token is kept, ms
--
-- Returns 1 when the amount was added, 0 when the token had been used.
if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then
  return 0
end
redis.call('INCRBY', KEYS[1], ARGV[1])
return 1
