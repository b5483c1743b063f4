-- seat_release.lua: free a user's seat in a room at once.
-- Run with lobby_lib.lua prepended.
--
-- KEYS[1]  users  HASH  user -> room number
-- KEYS[2]  rooms  ZSET  every room number of the lobby
-- KEYS[3]  open   ZSET  rooms that may have a free seat
-- KEYS[4]  seats  ZSET  the room's seats, user -> lease expiry
-- ARGV[1]  user
-- ARGV[2]  room number
-- ARGV[3]  lobby name
-- ARGV[4]  channel prefix
--
-- Returns 1 when the seat was freed ("left" published); 0 when the user held
-- no seat in the room; -1 when the room does not exist.
if not redis.call('ZSCORE', KEYS[2], ARGV[2]) then
  return -1
end
if redis.call('ZREM', KEYS[4], ARGV[1]) == 0 then
  return 0
end
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[2])
lobby_publish({chan = ARGV[4], lobby = ARGV[3]}, ARGV[2], ARGV[1], 'left')
return 1
