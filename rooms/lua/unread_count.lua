-- unread_count.lua: how many messages of a room come after a user's
-- last-read id, capped (read only).
--
-- KEYS[1]  read     HASH    the user's last-read ids in the lobby: room number -> padded id
-- KEYS[2]  history  STREAM  the room's messages
-- ARGV[1]  room number
-- ARGV[2]  cap (>= 1)
--
-- Returns the count, at most ARGV[2]: every message of the history (XLEN)
-- when the user has read nothing there; else those after the last-read id
-- (XRANGE exclusive, at most cap + 1 read). A history trimmed past the
-- last-read id counts what is left; a room that does not exist counts 0.
local cap = tonumber(ARGV[2])
local last = redis.call('HGET', KEYS[1], ARGV[1])
if not last then
  return math.min(redis.call('XLEN', KEYS[2]), cap)
end
local ms, seq = string.match(last, '^0*(%d-)%-0*(%d-)$')
if ms == '' then ms = '0' end
if seq == '' then seq = '0' end
local after = redis.call('XRANGE', KEYS[2], '(' .. ms .. '-' .. seq, '+', 'COUNT', cap + 1)
return math.min(#after, cap)
