-- room_create.lua: under the lobby's lock, seat a user, creating a room when
-- every room is full; refused unless the caller's lock fence is current.
-- Run with lock.FenceCheckLua and lobby_lib.lua prepended.
--
-- KEYS[1]  users     HASH    user -> room number
-- KEYS[2]  rooms     ZSET    every room number of the lobby
-- KEYS[3]  open      ZSET    rooms that may have a free seat
-- KEYS[4]  opencap   STRING  capacity KEYS[3] was kept for
-- KEYS[5]  due       ZSET    room number -> lower bound of earliest lease expiry
-- KEYS[6]  seats     prefix of the rooms' seat ZSETs (lobby hash tag)
-- KEYS[7]  fence     STRING  the lobby lock's fence counter (lock package)
-- KEYS[8]  seq       STRING  last room number handed out
-- KEYS[9]  record    prefix of the room record HASHes (lobby hash tag)
-- ARGV[1..6]  as seat_claim.lua: user, now, lease expiry, capacity, lobby,
--             channel prefix
-- ARGV[7]  the caller's lock fence (decimal)
--
-- Returns {status, room number, live members...}:
--   {3, n, ...}  room n was created and the user seated in it
--   {2, n, ...}  the user already held a live seat in room n
--   {1, n, ...}  a seat was free after all (another node created a room or
--                a seat was freed): the user is seated in room n
--   {-3}         a newer fence was issued: nothing was written
if not fence_is_current(KEYS[7], ARGV[7]) then
  return {-3}
end
local L = lobby_args(KEYS[1], KEYS[3], KEYS[5], KEYS[6], ARGV)
lobby_sync_open(L, KEYS[2], KEYS[4])
local held = lobby_held(L)
if held then
  return lobby_result(L, 2, held)
end
local seq = lobby_find(L)
if seq then
  return lobby_result(L, 1, seq)
end
seq = tostring(redis.call('INCR', KEYS[8]))
redis.call('HSET', KEYS[9] .. seq, 'id', L.lobby .. '-' .. seq, 'lobby', L.lobby,
  'seq', seq, 'created', L.now_s, 'fence', ARGV[7])
redis.call('ZADD', KEYS[2], seq, seq)
redis.call('ZADD', KEYS[3], seq, seq)
lobby_claim(L, seq)
return lobby_result(L, 3, seq)
