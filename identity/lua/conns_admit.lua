-- conns_admit.lua: admit one WebSocket of a client address under a cap,
-- as a lease that ends unless renewed or its node's run is alive.
--
-- KEYS[1]  conns   ZSET  member = connection id, score = lease end in ms
--                        (prefix:{ip:ADDR}:conns)
-- KEYS[2]  mark    STRING "<until> <runs>": every lease in conns counted
--                        when the live runs were <runs> (ARGV[6..], joined
--                        by spaces), and none stops counting before <until>
--                        (ms) while they are (prefix:{ip:ADDR}:connsmark)
-- ARGV[1]  now     the caller's clock, in milliseconds
-- ARGV[2]  lease   lease length in milliseconds (integer >= 1)
-- ARGV[3]  max     the cap on live leases; 0 = no cap (still recorded)
-- ARGV[4]  conn    the connection id
-- ARGV[5]  keep    the key's TTL in milliseconds (>= lease)
-- ARGV[6..] the runs of the live nodes, sorted, when the caller knows them:
--          a connection id is <run>-<n>, and a lease of a live run counts
--          however long ago it was written (its node does not renew it);
--          without them only leases that have not ended count
--
-- Returns 1 when the connection holds a lease ending now+lease (a new one,
-- or its own renewed: Admit is idempotent); 0 when max live leases of other
-- connections are held (no lease is written). Leases that count no more are
-- removed, so a node that died without releasing its connections holds
-- nothing once its run is gone from the registry (or after one lease).
--
-- Why the mark: with the live runs, whether a lease counts is not in its
-- score (a live run's leases are never renewed), so counting them is a
-- read of every lease of the address. Done at every admission, one busy
-- address (a carrier's NAT, a proxy whose clients' addresses the node is
-- not told) made each admission cost Redis O(its connections): 4.5 ms at
-- 6,000, and a reconnect storm quadratic. The mark records the last such
-- count: while the runs are the same and no lease of another run has
-- ended, every lease in conns counts, so ZCARD is the count, and an
-- admission is O(log n). The read of every lease is done again once the
-- mark no longer holds (a node started or died, a lease ended): once per
-- such change, not once per admission. Admit without the runs, and Renew,
-- delete the mark.
local now = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local max = tonumber(ARGV[3])
local conn = ARGV[4]
local function run(m)
  return string.match(m, '^(.*)%-[^%-]*$') or ''
end
if #ARGV < 6 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  local mine = redis.call('ZSCORE', KEYS[1], conn)
  local count = redis.call('ZCARD', KEYS[1])
  if not mine and max > 0 and count >= max then
    return 0
  end
  redis.call('ZADD', KEYS[1], now + lease, conn)
  -- every lease in it ends by now + lease (keep = lease)
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  -- a lease of a run the next caller may not count as live, which ends
  -- before what the mark says
  redis.call('DEL', KEYS[2])
  return 1
end
local live = {}
for i = 6, #ARGV do
  live[ARGV[i]] = true
end
local runs = table.concat(ARGV, ' ', 6)
local never = 9007199254740991 -- no lease of another run counts by its end
local till
local mark = redis.call('GET', KEYS[2])
if mark then
  local t, r = string.match(mark, '^(%d+) (.*)$')
  if r == runs and tonumber(t) > now then
    till = tonumber(t)
  end
end
local count, mine
local marked = till ~= nil
if marked then
  -- every lease here counts
  count = redis.call('ZCARD', KEYS[1])
  mine = redis.call('ZSCORE', KEYS[1], conn)
else
  -- count every lease, drop those that count no more, and mark the count
  count, mine, till = 0, false, never
  local all = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  local dead = {}
  for i = 1, #all, 2 do
    local m, ends = all[i], tonumber(all[i + 1])
    local ours = live[run(m)]
    if ours or ends > now then
      count = count + 1
      if m == conn then
        mine = true
      end
      if not ours and ends < till then
        till = ends
      end
    else
      dead[#dead + 1] = m
    end
  end
  -- ZREM in parts: unpack takes a few thousand values at most
  for i = 1, #dead, 1000 do
    redis.call('ZREM', KEYS[1], unpack(dead, i, math.min(i + 999, #dead)))
  end
end
-- save_mark writes what the count found, when it is not what the mark says
local function save_mark()
  if not marked then
    redis.call('SET', KEYS[2], string.format('%d', till) .. ' ' .. runs, 'PX', ARGV[5])
  end
end
if not mine and max > 0 and count >= max then
  save_mark()
  return 0
end
redis.call('ZADD', KEYS[1], now + lease, conn)
-- The key outlives its leases: with runs, leases of live runs are not
-- renewed, and the key lasts keep after the address's last admission.
redis.call('PEXPIRE', KEYS[1], ARGV[5])
if not live[run(conn)] and now + lease < till then
  till, marked = now + lease, false -- a run not live yet: its lease counts till it ends
end
save_mark()
return 1
