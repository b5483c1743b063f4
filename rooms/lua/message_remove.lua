-- message_remove.lua: remove one message from a room's history and tell
-- every member, in one step, so no node serves it after the event. Run
-- with redisx's call_lib.lua prepended.
--
-- KEYS[1]  rooms    ZSET    every room number of the lobby
-- KEYS[2]  history  STREAM  the room's messages
-- KEYS[3]  record   STRING  what this call answered, kept ARGV[6] ms
-- ARGV[1]  room number
-- ARGV[2]  stream id of the message ("ms-seq")
-- ARGV[3]  the room's channel
-- ARGV[4]  the message_removed event JSON
-- ARGV[5]  PUBLISH or SPUBLISH
-- ARGV[6]  how long the record is kept, ms
--
-- Returns 1 when the message was removed (event published); 0 when it was
-- not in the history; -1 when the room does not exist. A second run of the
-- same call (go-redis sends a late call again; the first copy may have
-- run) answers what the first answered and changes nothing: without the
-- record, a removal whose answer was lost was answered "no such message".
local done = call_recorded(KEYS[3])
if done then
  return done
end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return call_answer(KEYS[3], -1, ARGV[6])
end
if redis.call('XDEL', KEYS[2], ARGV[2]) == 0 then
  return call_answer(KEYS[3], 0, ARGV[6])
end
redis.call(ARGV[5], ARGV[3], ARGV[4])
return call_answer(KEYS[3], 1, ARGV[6])
