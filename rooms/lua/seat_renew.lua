-- seat_renew.lua: extend the leases of many seats of one lobby.
-- Run with lobby_lib.lua prepended.
--
-- KEYS[1]  users  HASH  user -> room number
-- KEYS[2]  open   ZSET  rooms that may have a free seat
-- KEYS[3]  due    ZSET  room number -> lower bound of earliest lease expiry
-- KEYS[4]  seats  prefix of the rooms' seat ZSETs (lobby hash tag)
-- ARGV[1]  now, unix ms
-- ARGV[2]  new lease expiry, unix ms
-- ARGV[3]  lobby name
-- ARGV[4]  channel prefix
-- ARGV[5..]  room number, user, room number, user, ...
--
-- Returns the 1-based positions of the pairs whose seat is gone (never
-- held, freed, or expired); an expired one is reaped now ("left" published).
-- A live seat's expiry only grows.
local L = {users = KEYS[1], open = KEYS[2], due = KEYS[3], seats = KEYS[4],
  now_s = ARGV[1], now = tonumber(ARGV[1]), lobby = ARGV[3], chan = ARGV[4]}
local exp_s, exp = ARGV[2], tonumber(ARGV[2])
local lost, stale, seen = {}, {}, {}
local i = 0
for j = 5, #ARGV - 1, 2 do
  i = i + 1
  local seq, user = ARGV[j], ARGV[j + 1]
  local seats = L.seats .. seq
  local s = redis.call('ZSCORE', seats, user)
  if s and tonumber(s) > L.now then
    if exp > tonumber(s) then
      redis.call('ZADD', seats, exp_s, user)
    end
  else
    lost[#lost + 1] = i
    if s and not seen[seq] then
      seen[seq] = true
      stale[#stale + 1] = seq
    end
  end
end
for _, seq in ipairs(stale) do
  lobby_reap(L, seq)
end
return lost
