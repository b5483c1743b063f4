-- read_mark.lua: move a user's last-read id in a room forward, never back.
--
-- KEYS[1]  read     HASH    the user's last-read ids in the lobby: room number -> padded id
-- KEYS[2]  rooms    ZSET    every room number of the lobby
-- KEYS[3]  history  STREAM  the room's messages
-- ARGV[1]  room number
-- ARGV[2]  message id, padded (13 digits, '-', 6 digits): padded ids of one
--          room compare as strings in send order
-- ARGV[3]  how long KEYS[1] lives after this call, ms (the lobby's idle TTL)
--
-- An id after the room's newest message is taken as the newest message, so
-- that a made-up id cannot hide messages not sent yet. Returns 1 when the
-- last-read id moved, 0 when it already was at or after the id (or the
-- room has no messages), -1 when the room does not exist. KEYS[1]'s expiry
-- is refreshed whenever the room exists.
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return -1
end
local function pad(id)
  local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
  return string.rep('0', 13 - #ms) .. ms .. '-' .. string.rep('0', 6 - #seq) .. seq
end
local moved = 0
local newest = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)[1]
if newest then
  local id = ARGV[2]
  local top = pad(newest[1])
  if id > top then
    id = top
  end
  local cur = redis.call('HGET', KEYS[1], ARGV[1])
  if not cur or id > cur then
    redis.call('HSET', KEYS[1], ARGV[1], id)
    moved = 1
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return moved
