-- seat_release.lua: free a user's seat in a room at once, with all its
-- attachments (an explicit leave). Run with redisx's call_lib.lua and
-- lobby_lib.lua prepended.
--
-- KEYS[1..14]  the lobby's keys, see lobby_lib.lua
-- KEYS[15]     the call's record (STRING): the code this call answered
-- ARGV[1..7]   see lobby_lib.lua
-- ARGV[8]  user
-- ARGV[9]  room number
-- ARGV[10] how long the record is kept, ms
--
-- Returns {code, idle, online, rooms, stamp, changed} when the seat was
-- freed: code 1 ("left" published), idle 1 when the lobby has no seat left,
-- then the lobby's count (lobby_count in lobby_lib.lua); {0, 0} when the
-- user held no seat in the room; {-1, 0} when the room does not exist.
--
-- The answer is recorded under the call (KEYS[15]) and a second run of the
-- same call answers it again, changing nothing: go-redis sends a call
-- again when its reply is late, and the first copy may have run. Without
-- the record, a copy that came after the user took a seat in the room
-- again (another connection's join) freed that new seat. A retry of a
-- freeing call answers the lobby's count as it is now.
local L = lobby_args()
local user, seq = ARGV[8], ARGV[9]
local done = call_recorded(KEYS[15])
if done == 1 then
  L.check_idle = true -- retire again if the first copy did: its answer was lost
  local f = lobby_finish(L)
  return {1, f[2], f[3], f[4], f[5], f[6]}
elseif done then
  return {done, 0}
end
if not redis.call('ZSCORE', L.rooms, seq) then
  return {call_answer(KEYS[15], -1, ARGV[10]), 0}
end
local at = redis.call('ZSCORE', L.members, user)
if not at or seqstr(at) ~= seq then
  return {call_answer(KEYS[15], 0, ARGV[10]), 0}
end
lobby_free(L, seq, user)
call_answer(KEYS[15], 1, ARGV[10])
local f = lobby_finish(L)
return {1, f[2], f[3], f[4], f[5], f[6]}
