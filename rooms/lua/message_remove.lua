-- message_remove.lua: remove one message from a room's history and tell
-- every member, in one step, so no node serves it after the event.
--
-- KEYS[1]  rooms    ZSET    every room number of the lobby
-- KEYS[2]  history  STREAM  the room's messages
-- ARGV[1]  room number
-- ARGV[2]  stream id of the message ("ms-seq")
-- ARGV[3]  the room's channel
-- ARGV[4]  the message_removed event JSON
-- ARGV[5]  PUBLISH or SPUBLISH
--
-- Returns 1 when the message was removed (event published); 0 when it was
-- not in the history; -1 when the room does not exist.
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return -1
end
if redis.call('XDEL', KEYS[2], ARGV[2]) == 0 then
  return 0
end
redis.call(ARGV[5], ARGV[3], ARGV[4])
return 1
