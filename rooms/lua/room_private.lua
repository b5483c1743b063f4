-- room_private.lua: create a private room — room ARGV[9] of a lobby of its
-- own, its only room — with a seat reserved for each of the given users
-- until ARGV[8], or answer the one that exists (a retry). Run with
-- lobby_lib.lua prepended.
--
-- KEYS[1..14]  the lobby's keys, see lobby_lib.lua
-- ARGV[1..7]   now, lease expiry, capacity, lobby, channel prefix,
--              publish command, idle TTL: see lobby_lib.lua
-- ARGV[8]      the reservation's end, unix ms: a seat nobody attached to
--              by then is reaped like any lapsed seat ("left" published)
-- ARGV[9]      the room's number (1, or a random one so that the room id
--              cannot be guessed)
-- ARGV[10..]   the users the room is for (each at most once)
--
-- The lobby's records HASH gets the field "private" = the users,
-- space-separated: the seat scripts refuse a lobby join of such a lobby,
-- and a claim of its room by anyone else (code -4), and its counts are
-- never indexed in the lobby listing (lobby_count).
--
-- Returns {1, {live members}, lobby_finish's values, number} for a room
-- created now, {2, {live members}, ..., number} for one created before with
-- the same users (its number as it was made), {-1} when the lobby holds rooms already (a public lobby, or a
-- private one for other users): nothing is written then.
local L = lobby_args()
local users = {}
for i = 10, #ARGV do
  users[#users + 1] = ARGV[i]
end
local list = table.concat(users, ' ')
local private = redis.call('HGET', L.records, 'private')
if private then
  -- a retry answers the room made for the same users, whatever grants
  -- changed since (room_grant.lua keeps them in "made")
  if (redis.call('HGET', L.records, 'made') or private) ~= list then
    return {-1}
  end
  local seq = redis.call('GET', L.seq) or '1'
  return {2, room_live(L, seq), lobby_finish(L), seq}
end
if redis.call('EXISTS', L.rooms) == 1 or redis.call('EXISTS', L.seq) == 1 then
  return {-1}
end
local seq = ARGV[9]
lobby_wake(L)
redis.call('SET', L.seq, seq)
redis.call('SET', L.opencap, L.cap)
redis.call('HSET', L.records, seq, '{"id":"' .. L.lobby .. '-' .. seq .. '","lobby":"' .. L.lobby ..
  '","seq":' .. seq .. ',"created":' .. L.now_s .. ',"fence":0,"private":true}', 'private', list)
redis.call('ZADD', L.rooms, seq, seq)
for _, user in ipairs(users) do
  redis.call('ZADD', L.members, seq, user)
  redis.call('ZADD', L.leases, ARGV[8], user)
end
L.stale = false
return {1, room_live(L, seq), lobby_finish(L), seq}
