-- seat_detach.lua: compare-and-delete one attachment of a user's seat; the
-- seat is freed when no live attachment holds it any more. Run with
-- lobby_lib.lua prepended.
--
-- KEYS[1..14]  the lobby's keys, see lobby_lib.lua
-- ARGV[1..7]   see lobby_lib.lua
-- ARGV[8]   user
-- ARGV[9]   room number
-- ARGV[10]  attachment id
--
-- Returns {code, idle, online, rooms, stamp, changed} when the script
-- freed a seat, else {code, 0}:
--   1  the seat was freed ("left" published): no live attachment is left
--      once this one (and the expired ones) are gone, or the seat had
--      expired (then reaped)
--   0  the attachment is gone and another live one keeps the seat; or the
--      attachment was not recorded on the user's seat in this room (detached
--      already, reaped, never attached, or the seat is in another room):
--      nothing that holds a seat is touched
--  -1  the room does not exist
-- Expired attachments of the user are dropped too; the seat's lease becomes
-- the latest of the remaining ones. idle is 1 when the lobby has no seat
-- left; online, rooms, stamp and changed are the lobby's count (lobby_count
-- in lobby_lib.lua).
local L = lobby_args()
local user, seq, id = ARGV[8], ARGV[9], ARGV[10]
if not redis.call('ZSCORE', L.rooms, seq) then
  return {-1, 0}
end
local at = redis.call('ZSCORE', L.members, user)
if not at or seqstr(at) ~= seq then
  return {0, 0}
end
local exp = tonumber(redis.call('ZSCORE', L.leases, user) or '0')
if exp <= L.now then
  -- The seat's lease ran out: reap it like anyone would.
  lobby_free(L, seq, user)
  local f = lobby_finish(L)
  return {1, f[2], f[3], f[4], f[5], f[6]}
end
local list, dropped = atts_load(L, user)
local keep, had = {}, nil
for _, a in ipairs(list) do
  if a[1] == id then
    had = a
  else
    keep[#keep + 1] = a
  end
end
if not had and not dropped then
  return {0, 0} -- not ours: touch nothing
end
if had then
  redis.call('ZREM', L.atts, user .. ' ' .. id)
  runatts_forget(L, user, {had})
end
if #keep == 0 then
  -- No live attachment holds the seat any more.
  lobby_free(L, seq, user)
  local f = lobby_finish(L)
  return {1, f[2], f[3], f[4], f[5], f[6]}
end
atts_store(L, user, seq, keep)
local latest = 0
for _, a in ipairs(keep) do
  if a[3] > latest then latest = a[3] end
end
if latest < exp then
  -- The seat's lease is its latest attachment's.
  redis.call('ZADD', L.leases, latest, user)
end
return {0, 0}
