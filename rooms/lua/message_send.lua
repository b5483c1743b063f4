-- message_send.lua: take a token from the sender's say bucket, append a
-- message to a room's history and publish it, so the ids on the channel
-- come in history order; a refused say writes nothing.
--
-- KEYS[1]  rooms    ZSET    every room number of the lobby
-- KEYS[2]  seats    ZSET    the room's seats, user -> lease expiry
-- KEYS[3]  history  STREAM  the room's messages: from, text, ts
-- KEYS[4]  rate     HASH    the sender's say bucket in the lobby: t (tokens), at (ms)
-- KEYS[5]  rest     SET     the room's users with a live REST attachment
-- ARGV[1]  room number
-- ARGV[2]  user
-- ARGV[3]  now, unix ms (the message's ts)
-- ARGV[4]  history cap (XADD MAXLEN ~)
-- ARGV[5]  text
-- ARGV[6]  the room's channel
-- ARGV[7]  the event JSON up to the message id
-- ARGV[8]  the event JSON after the message id
-- ARGV[9]  PUBLISH or SPUBLISH
-- ARGV[10] say rate, tokens per second (<= 0: no limit)
-- ARGV[11] bucket size (>= 1)
--
-- Returns {id, rest}: the stream id "ms-seq" of the new message, published
-- as ARGV[7] .. id zero-padded to "%013d-%06d" .. ARGV[8], and the number of
-- users of the room with a REST attachment; {0} when the user holds no live
-- seat in the room; {-1} when the room does not exist; {-2, ms} when the
-- bucket is empty: a token is there again in ms.
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return {-1}
end
local now = tonumber(ARGV[3])
local exp = redis.call('ZSCORE', KEYS[2], ARGV[2])
if not exp or tonumber(exp) <= now then
  return {0}
end
local rate = tonumber(ARGV[10])
if rate > 0 then
  -- Token bucket: a missing key is a full one; the key expires when it
  -- would be full again, so an idle sender costs no memory.
  local burst = tonumber(ARGV[11])
  local v = redis.call('HMGET', KEYS[4], 't', 'at')
  local tokens, at = burst, now
  if v[1] and v[2] then
    tokens, at = tonumber(v[1]), tonumber(v[2])
  end
  tokens = math.min(burst, tokens + math.max(0, now - at) * rate / 1000)
  if tokens < 1 then
    return {-2, math.ceil((1 - tokens) * 1000 / rate)}
  end
  tokens = tokens - 1
  redis.call('HSET', KEYS[4], 't', tostring(tokens), 'at', math.max(now, at))
  redis.call('PEXPIRE', KEYS[4], math.ceil((burst - tokens) * 1000 / rate))
end
local id = redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*',
  'from', ARGV[2], 'text', ARGV[5], 'ts', ARGV[3])
local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
local padded = string.rep('0', 13 - #ms) .. ms .. '-' .. string.rep('0', 6 - #seq) .. seq
redis.call(ARGV[9], ARGV[6], ARGV[7] .. padded .. ARGV[8])
return {id, redis.call('SCARD', KEYS[5])}
