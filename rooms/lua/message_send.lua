-- message_send.lua: append a message to a room's history and publish it, so
-- the ids on the channel come in history order.
--
-- KEYS[1]  rooms    ZSET    every room number of the lobby
-- KEYS[2]  seats    ZSET    the room's seats, user -> lease expiry
-- KEYS[3]  history  STREAM  the room's messages: from, text, ts
-- ARGV[1]  room number
-- ARGV[2]  user
-- ARGV[3]  now, unix ms (the message's ts)
-- ARGV[4]  history cap (XADD MAXLEN ~)
-- ARGV[5]  text
-- ARGV[6]  the room's channel
-- ARGV[7]  the event JSON up to the message id
-- ARGV[8]  the event JSON after the message id
--
-- Returns the stream id "ms-seq" of the new message, published as
-- ARGV[7] .. id zero-padded to "%013d-%06d" .. ARGV[8]; 0 when the user
-- holds no live seat in the room; -1 when the room does not exist.
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return -1
end
local exp = redis.call('ZSCORE', KEYS[2], ARGV[2])
if not exp or tonumber(exp) <= tonumber(ARGV[3]) then
  return 0
end
local id = redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*',
  'from', ARGV[2], 'text', ARGV[5], 'ts', ARGV[3])
local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
local padded = string.rep('0', 13 - #ms) .. ms .. '-' .. string.rep('0', 6 - #seq) .. seq
redis.call('PUBLISH', ARGV[6], ARGV[7] .. padded .. ARGV[8])
return id
