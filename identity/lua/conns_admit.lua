-- conns_admit.lua: admit one WebSocket of a client address under a cap,
-- as a lease that ends unless renewed.
--
-- KEYS[1]  conns   ZSET  member = connection id, score = lease end in ms
--                        (prefix:{ip:ADDR}:conns)
-- ARGV[1]  now     the caller's clock, in milliseconds
-- ARGV[2]  lease   lease length in milliseconds (integer >= 1)
-- ARGV[3]  max     the cap on live leases; 0 = no cap (still recorded)
-- ARGV[4]  conn    the connection id
--
-- Returns 1 when the connection holds a lease ending now+lease (a new one,
-- or its own renewed: Admit is idempotent); 0 when max live leases of other
-- connections are held (nothing is written). Leases that ended at or before
-- now are removed first, so a node that died without releasing its
-- connections holds nothing after one lease.
local now = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local max = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[4]) then
  if max > 0 and redis.call('ZCARD', KEYS[1]) >= max then
    return 0
  end
end
redis.call('ZADD', KEYS[1], now + lease, ARGV[4])
-- The key lives as long as its newest lease: every lease in it ends by then.
redis.call('PEXPIRE', KEYS[1], lease)
return 1
