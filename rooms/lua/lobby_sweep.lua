-- lobby_sweep.lua: reap the expired seats of one lobby, with their
-- attachments; retire the lobby when it has no seat left. Run with
-- lobby_lib.lua prepended.
--
-- KEYS[1..12]  the lobby's keys, see lobby_lib.lua
-- ARGV[1..7]   see lobby_lib.lua
-- ARGV[8]  most rooms to visit
--
-- Returns {seats reaped ("left" published for each), rooms visited, the
-- lobby's earliest due score after the sweep or "" when no room has seats,
-- idle, online, rooms, stamp, changed}: the last four are the lobby's count
-- (lobby_count in lobby_lib.lua); idle is 1 when the lobby has no seat (its keys then expire after
-- the idle TTL; a lobby that had none already keeps its expiry, or gets one
-- if it had none).
local L = lobby_args(KEYS, ARGV)
local n, visited = lobby_reap_due(L, tonumber(ARGV[8]))
local first = redis.call('ZRANGE', L.due, 0, 0, 'WITHSCORES')
if redis.call('EXISTS', L.users) == 0 and redis.call('PTTL', L.rooms) == -1 then
  L.check_idle = true -- a lobby idle from before expiries existed
end
local f = lobby_finish(L)
local idle = f[2]
if redis.call('EXISTS', L.users) == 0 then
  idle = 1
end
return {n, visited, first[2] or '', idle, f[3], f[4], f[5], f[6]}
