-- seat_claim.lua: seat a user in a lobby: the lowest-numbered room with a
-- free seat, or one given room. Run with lobby_lib.lua prepended.
--
-- KEYS[1]  users     HASH    user -> room number
-- KEYS[2]  rooms     ZSET    every room number of the lobby
-- KEYS[3]  open      ZSET    rooms that may have a free seat
-- KEYS[4]  opencap   STRING  capacity KEYS[3] was kept for
-- KEYS[5]  due       ZSET    room number -> lower bound of earliest lease expiry
-- KEYS[6]  seats     prefix of the rooms' seat ZSETs (lobby hash tag)
-- ARGV[1]  user
-- ARGV[2]  now, unix ms
-- ARGV[3]  lease expiry of a new or renewed seat, unix ms
-- ARGV[4]  capacity (>= 1)
-- ARGV[5]  lobby name
-- ARGV[6]  channel prefix
-- ARGV[7]  room number to seat the user in, or "" for the lowest with a free seat
--
-- Returns {status, room number, live members...}:
--   {2, n, ...}  the user already held a live seat in room n (lease extended;
--                no event)
--   {1, n, ...}  the user is seated in room n now ("joined" published)
--   {0}          every room is full (ARGV[7] ""): create one under the lock
--   {0, n}       room n is full (ARGV[7] n)
--   {-1}         room ARGV[7] does not exist
--   {-2, n}      the user holds a live seat in another room n (ARGV[7] set)
local L = lobby_args(KEYS[1], KEYS[3], KEYS[5], KEYS[6], ARGV)
lobby_sync_open(L, KEYS[2], KEYS[4])
local target = ARGV[7]
if target ~= '' and not redis.call('ZSCORE', KEYS[2], target) then
  return {-1}
end
local held = lobby_held(L)
if target == '' then
  if held then
    return lobby_result(L, 2, held)
  end
  local seq = lobby_find(L)
  if seq then
    return lobby_result(L, 1, seq)
  end
  return {0}
end
if held then
  if held == target then
    return lobby_result(L, 2, held)
  end
  return {-2, held}
end
if lobby_claim(L, target) then
  return lobby_result(L, 1, target)
end
return {0, target}
