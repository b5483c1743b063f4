-- seat_release.lua: free a user's seat in a room at once, with all its
-- attachments (an explicit leave). Run with lobby_lib.lua prepended.
--
-- KEYS[1..14]  the lobby's keys, see lobby_lib.lua
-- ARGV[1..7]   see lobby_lib.lua
-- ARGV[8]  user
-- ARGV[9]  room number
--
-- Returns {code, idle, online, rooms, stamp, changed} when the seat was
-- freed: code 1 ("left" published), idle 1 when the lobby has no seat left,
-- then the lobby's count (lobby_count in lobby_lib.lua); {0, 0} when the
-- user held no seat in the room; {-1, 0} when the room does not exist.
local L = lobby_args()
local user, seq = ARGV[8], ARGV[9]
if not redis.call('ZSCORE', L.rooms, seq) then
  return {-1, 0}
end
local at = redis.call('ZSCORE', L.members, user)
if not at or seqstr(at) ~= seq then
  return {0, 0}
end
lobby_free(L, seq, user)
local f = lobby_finish(L)
return {1, f[2], f[3], f[4], f[5], f[6]}
