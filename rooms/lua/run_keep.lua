-- run_keep.lua: extend a run's lease in one lobby, which keeps every
-- attachment bound to the run there alive (lobby_lib.lua), in O(log N):
-- only when the run's lease is still live and the lobby holds exactly the
-- number of bound attachments the run thinks it has; else nothing is
-- written and the caller renews the run's attachments one by one
-- (seat_renew.lua), which tells it which are lost. Run with lobby_lib.lua
-- prepended.
--
-- KEYS[1..14]  the lobby's keys, see lobby_lib.lua
-- ARGV[1..7]   see lobby_lib.lua (ARGV[2]: the run's new lease expiry)
-- ARGV[8]      the run
-- ARGV[9]      how many attachments the run holds in the lobby
--
-- Returns 1 when the run's lease was extended, 0 when the caller must renew
-- one by one (the run's lease had run out and its attachments were ended:
-- lobby_args; or attachments were lost or added meanwhile).
local L = lobby_args(true) -- no lobby_finish here: the counts are not read
local run = ARGV[8]
local exp = redis.call('ZSCORE', L.runs, run)
if not exp or tonumber(exp) <= L.now then
  return 0
end
local lo, hi = run_range(run)
if redis.call('ZLEXCOUNT', L.runatts, lo, hi) ~= tonumber(ARGV[9]) then
  return 0
end
run_lease(L, run)
return 1
