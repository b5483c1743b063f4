-- conns_admit.lua: admit one WebSocket of a client address under a cap,
-- as a lease that ends unless renewed or its node's run is alive.
--
-- KEYS[1]  conns   ZSET  member = connection id, score = lease end in ms
--                        (prefix:{ip:ADDR}:conns)
-- ARGV[1]  now     the caller's clock, in milliseconds
-- ARGV[2]  lease   lease length in milliseconds (integer >= 1)
-- ARGV[3]  max     the cap on live leases; 0 = no cap (still recorded)
-- ARGV[4]  conn    the connection id
-- ARGV[5]  keep    the key's TTL in milliseconds (>= lease)
-- ARGV[6..] the runs of the live nodes, when the caller knows them: a
--          connection id is <run>-<n>, and a lease of a live run counts
--          however long ago it was written (its node does not renew it);
--          without them only leases that have not ended count
--
-- Returns 1 when the connection holds a lease ending now+lease (a new one,
-- or its own renewed: Admit is idempotent); 0 when max live leases of other
-- connections are held (nothing is written). Leases that count no more are
-- removed first, so a node that died without releasing its connections
-- holds nothing once its run is gone from the registry (or after one lease).
local now = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local max = tonumber(ARGV[3])
local conn = ARGV[4]
local count, mine
if #ARGV >= 6 then
  local live = {}
  for i = 6, #ARGV do
    live[ARGV[i]] = true
  end
  count, mine = 0, false
  local all = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  local dead = {}
  for i = 1, #all, 2 do
    local m = all[i]
    if tonumber(all[i + 1]) > now or live[string.match(m, '^(.*)%-[^%-]*$') or ''] then
      count = count + 1
      if m == conn then
        mine = true
      end
    else
      dead[#dead + 1] = m
    end
  end
  if #dead > 0 then
    redis.call('ZREM', KEYS[1], unpack(dead))
  end
else
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  mine = redis.call('ZSCORE', KEYS[1], conn)
  count = redis.call('ZCARD', KEYS[1])
end
if not mine and max > 0 and count >= max then
  return 0
end
redis.call('ZADD', KEYS[1], now + lease, conn)
-- The key outlives its leases: without runs every lease in it ends by
-- now + lease (keep = lease); with runs, leases of live runs are not renewed
-- and the key lasts keep after the address's last admission.
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
