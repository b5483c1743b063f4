-- lobby_sweep.lua: reap the expired seats of one lobby, with their
-- attachments, and drop the expired attachments of the seats that live on;
-- retire the lobby when it has no seat left. Run with lobby_lib.lua
-- prepended.
--
-- KEYS[1..14]  the lobby's keys, see lobby_lib.lua
-- ARGV[1..7]   see lobby_lib.lua
-- ARGV[8]  most seats to reap
--
-- Returns {seats reaped ("left" published for each), 1 when more may be
-- due (the limit was reached) else 0, the lobby's earliest lease expiry
-- (of a seat or of a run's attachments) after the sweep or "" when it has no seat, idle, online, rooms, stamp,
-- changed}: the last four are the lobby's count (lobby_count in
-- lobby_lib.lua); idle is 1 when the lobby has no seat (its keys then
-- expire after the idle TTL; a lobby that had none already keeps its
-- expiry, or gets one if it had none).
local L = lobby_args()
local n, more = lobby_reap(L, tonumber(ARGV[8]))
atts_purge(L, 1000)
local first = redis.call('ZRANGE', L.leases, 0, 0, 'WITHSCORES')
local run = redis.call('ZRANGE', L.runs, 0, 0, 'WITHSCORES')
if run[2] and (not first[2] or tonumber(run[2]) < tonumber(first[2])) then
  first = run -- a run's lease ends first: its seats are due then
end
if redis.call('EXISTS', L.members) == 0 and redis.call('PTTL', L.rooms) == -1 then
  L.check_idle = true -- a lobby idle from before expiries existed
end
local f = lobby_finish(L)
local idle = f[2]
if redis.call('EXISTS', L.members) == 0 then
  idle = 1
end
return {n, more and 1 or 0, first[2] or '', idle, f[3], f[4], f[5], f[6]}
