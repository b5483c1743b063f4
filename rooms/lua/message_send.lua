-- message_send.lua: take a token from the sender's say bucket, append a
-- message to a room's history and publish it, so the ids on the channel
-- come in history order; a refused say writes nothing.
--
-- KEYS[1]  rooms    ZSET    every room number of the lobby
-- KEYS[2]  members  ZSET    user -> room number of the user's seat
-- KEYS[3]  leases   ZSET    user -> the seat's lease expiry (ms)
-- KEYS[4]  history  STREAM  the room's messages: from, text, ts
-- KEYS[5]  rate     HASH    the sender's say bucket in the lobby: t (tokens), at (ms)
-- KEYS[6]  rest     ZSET    user -> room number, for users with a REST attachment
-- KEYS[7]  said     STRING  the say recorded under the sender's idempotency
--                           key, or under "~<call>/<i>" for a say without
--                           one: "<call> <room> <text hash> <stream id> <ts>"
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
-- ARGV[12] the history's TTL, ms (the lobby's idle TTL), from this send
-- ARGV[13] how long KEYS[7] is kept, ms
-- ARGV[14] the text's hash (hex)
-- ARGV[15] the send call and the say's place in it ("<call>/<i>")
-- ARGV[16] "system" for a message of the system (SendOptions.System): no
--          seat is checked (ARGV[10] 0); absent otherwise
--
-- Returns {id, rest}: the stream id "ms-seq" of the new message, published
-- as ARGV[7] .. id zero-padded to "%013d-%06d" .. ARGV[8], and the number of
-- users of the room with a REST attachment; {0} when the user holds no live
-- seat in the room; {-1} when the room does not exist; {-2, ms} when the
-- bucket is empty: a token is there again in ms. With KEYS[7]: {-4, id, ts,
-- call, rest} when the key already recorded this say (same room, same
-- text), which is not sent again: nothing is written, published or taken;
-- {-3} when it recorded another room's or text's say. The key is checked
-- before the seat and the bucket (the say was applied: its answer stands
-- even if the seat has gone since) and recorded with the XADD.
local said = KEYS[7]
if said then
  local rec = redis.call('GET', said)
  if rec then
    local call, room, hash, id, ts = string.match(rec, '^(%S+) (%S+) (%S+) (%S+) (%S+)$')
    if room ~= ARGV[1] or hash ~= ARGV[14] then
      return {-3}
    end
    return {-4, id, ts, call, redis.call('ZCOUNT', KEYS[6], ARGV[1], ARGV[1])}
  end
end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return {-1}
end
local now = tonumber(ARGV[3])
if ARGV[16] ~= 'system' then
  local at = redis.call('ZSCORE', KEYS[2], ARGV[2])
  local exp = redis.call('ZSCORE', KEYS[3], ARGV[2])
  if not at or string.format('%d', tonumber(at)) ~= ARGV[1] or not exp or tonumber(exp) <= now then
    return {0}
  end
end
local rate = tonumber(ARGV[10])
if rate > 0 then
  -- Token bucket: a missing key is a full one; the key expires when it
  -- would be full again, so an idle sender costs no memory.
  local burst = tonumber(ARGV[11])
  local v = redis.call('HMGET', KEYS[5], 't', 'at')
  local tokens, last = burst, now
  if v[1] and v[2] then
    tokens, last = tonumber(v[1]), tonumber(v[2])
  end
  tokens = math.min(burst, tokens + math.max(0, now - last) * rate / 1000)
  if tokens < 1 then
    return {-2, math.ceil((1 - tokens) * 1000 / rate)}
  end
  tokens = tokens - 1
  redis.call('HSET', KEYS[5], 't', tostring(tokens), 'at', math.max(now, last))
  redis.call('PEXPIRE', KEYS[5], math.ceil((burst - tokens) * 1000 / rate))
end
local id = redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], '*',
  'from', ARGV[2], 'text', ARGV[5], 'ts', ARGV[3])
-- The sender is seated (or the system spoke): the lobby is not idle, and
-- its keys (the room counter among them) expire no sooner than this.
redis.call('PEXPIRE', KEYS[4], ARGV[12])
if said then
  redis.call('SET', said, ARGV[15] .. ' ' .. ARGV[1] .. ' ' .. ARGV[14] .. ' ' .. id .. ' ' .. ARGV[3], 'PX', ARGV[13])
end
local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
local padded = string.rep('0', 13 - #ms) .. ms .. '-' .. string.rep('0', 6 - #seq) .. seq
if ARGV[9] == 'SPUBLISH' then
  redis.call('SPUBLISH', ARGV[6], ARGV[7] .. padded .. ARGV[8])
else
  redis.call('PUBLISH', ARGV[6], ARGV[7] .. padded .. ARGV[8])
end
return {id, redis.call('ZCOUNT', KEYS[6], ARGV[1], ARGV[1])}
