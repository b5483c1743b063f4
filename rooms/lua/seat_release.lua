-- seat_release.lua: free a user's seat in a room at once, with all its
-- attachments (an explicit leave). Run with lobby_lib.lua prepended.
--
-- KEYS[1..12]  the lobby's keys, see lobby_lib.lua
-- ARGV[1..7]   see lobby_lib.lua
-- ARGV[8]  user
-- ARGV[9]  room number
--
-- Returns {code, idle}: code 1 when the seat was freed ("left" published);
-- 0 when the user held no seat in the room; -1 when the room does not
-- exist. idle is 1 when the lobby has no seat left.
local L = lobby_args(KEYS, ARGV)
local user, seq = ARGV[8], ARGV[9]
if not redis.call('ZSCORE', L.rooms, seq) then
  return {-1, 0}
end
if not redis.call('ZSCORE', L.seats .. seq, user) then
  return {0, 0}
end
lobby_free(L, seq, user)
return {1, lobby_finish(L)[2]}
