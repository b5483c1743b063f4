-- room_read.lua: whether a room exists, and its live members (read only).
--
-- KEYS[1]  rooms    ZSET  every room number of the lobby
-- KEYS[2]  members  ZSET  user -> room number
-- KEYS[3]  leases   ZSET  user -> the seat's lease expiry (ms)
-- ARGV[1]  room number
-- ARGV[2]  now, unix ms
--
-- Returns {1, {live members}} for a room that exists, {0} for one that
-- does not. A member count costs ZCOUNT's O(log N) in the lobby's seats;
-- listing them, the room's seats.
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return {0}
end
local now = tonumber(ARGV[2])
local users = redis.call('ZRANGEBYSCORE', KEYS[2], ARGV[1], ARGV[1])
local live = {}
for i = 1, #users, 1000 do
  local chunk = {}
  for j = i, math.min(i + 999, #users) do
    chunk[#chunk + 1] = users[j]
  end
  local v = redis.call('ZMSCORE', KEYS[3], unpack(chunk))
  for j = 1, #v do
    if v[j] and tonumber(v[j]) > now then
      live[#live + 1] = chunk[j]
    end
  end
end
return {1, live}
