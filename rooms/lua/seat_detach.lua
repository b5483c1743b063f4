-- seat_detach.lua: compare-and-delete one attachment of a user's seat; the
-- seat is freed when no live attachment holds it any more. Run with
-- lobby_lib.lua prepended.
--
-- KEYS[1..12]  the lobby's keys, see lobby_lib.lua
-- ARGV[1..7]   see lobby_lib.lua
-- ARGV[8]   user
-- ARGV[9]   room number
-- ARGV[10]  attachment id
--
-- Returns {code, idle, online, rooms, stamp, changed} when the script
-- freed or dropped a seat, else {code, 0}:
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
local L = lobby_args(KEYS, ARGV)
local user, seq, id = ARGV[8], ARGV[9], ARGV[10]
if not redis.call('ZSCORE', L.rooms, seq) then
  return {-1, 0}
end
if redis.call('HGET', L.users, user) ~= seq then
  return {0, 0}
end
local seats = L.seats .. seq
local exp = redis.call('ZSCORE', seats, user)
if not exp or tonumber(exp) <= L.now then
  -- The seat's lease ran out (or it is missing): reap it like anyone would.
  local freed = 0
  if exp then
    lobby_reap(L, seq)
    freed = 1
  else
    redis.call('HDEL', L.users, user)
    atts_drop(L, user, seq)
    L.check_idle = true
  end
  local f = lobby_finish(L)
  return {freed, f[2], f[3], f[4], f[5], f[6]}
end
local a, n, _, _, dropped = atts_get(L, user)
local had = a[id] ~= nil
if not had and not dropped then
  return {0, 0} -- not ours: touch nothing
end
if had then
  a[id] = nil
  n = n - 1
end
if n == 0 then
  -- No live attachment holds the seat any more.
  lobby_free(L, seq, user)
  local f = lobby_finish(L)
  return {1, f[2], f[3], f[4], f[5], f[6]}
end
local latest, rest = 0, false
for _, v in pairs(a) do
  if v[1] > latest then latest = v[1] end
  if v[2] == 1 then rest = true end
end
atts_put(L, user, seq, a, n, rest)
if latest < tonumber(exp) then
  -- The seat's lease is its latest attachment's.
  redis.call('ZADD', seats, latest, user)
  redis.call('ZADD', L.due, 'LT', latest, seq)
end
return {0, 0}
