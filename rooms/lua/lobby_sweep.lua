-- lobby_sweep.lua: reap the expired seats of one lobby.
-- Run with lobby_lib.lua prepended.
--
-- KEYS[1]  users  HASH  user -> room number
-- KEYS[2]  open   ZSET  rooms that may have a free seat
-- KEYS[3]  due    ZSET  room number -> lower bound of earliest lease expiry
-- KEYS[4]  seats  prefix of the rooms' seat ZSETs (lobby hash tag)
-- ARGV[1]  now, unix ms
-- ARGV[2]  most rooms to visit
-- ARGV[3]  lobby name
-- ARGV[4]  channel prefix
--
-- Returns {seats reaped ("left" published for each), rooms visited, the
-- lobby's earliest due score after the sweep or "" when no room has seats}.
local L = {users = KEYS[1], open = KEYS[2], due = KEYS[3], seats = KEYS[4],
  now_s = ARGV[1], now = tonumber(ARGV[1]), lobby = ARGV[3], chan = ARGV[4]}
local n, visited = lobby_reap_due(L, tonumber(ARGV[2]))
local first = redis.call('ZRANGE', L.due, 0, 0, 'WITHSCORES')
return {n, visited, first[2] or ''}
