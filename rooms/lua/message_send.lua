-- message_send.lua: take a token from the sender's say bucket, append a
-- message to a room's history and publish it, so the ids on the channel
-- come in history order; a refused say writes nothing.
--
-- KEYS[1]  rooms    ZSET    every room number of the lobby
-- KEYS[2]  members  ZSET    user -> room number of the user's seat
-- KEYS[3]  leases   ZSET    user -> the seat's lease expiry (ms)
-- KEYS[4]  history  STREAM  the room's messages: from, text, ts
-- KEYS[5]  rate     STRING  the sender's say bucket in the lobby: "<tokens> <at ms>"
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
-- ARGV[16] "system" for a message of the system (SendOptions.System) or
--          of the application's backend (SendOptions.Server, from ARGV[2]): no
--          seat is checked (ARGV[10] 0); "" otherwise
-- ARGV[17] "1" when the node refreshes the history's TTL with this send
--          (at most once per room per IdleTTL/48, as Renew does); "" or
--          absent otherwise: the TTL is then set only on a history this
--          send creates
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
--
-- The commands of an accepted user's say, each with its reason (8 to 9,
-- down from 12; BenchmarkSendCommands counts them):
--   GET said         exactly once: a retried say (client, go-redis after a
--                    timeout, reconnect) is answered with its first result
--   ZSCORE members   the seat check: the sender's seat is in this room ...
--   ZSCORE leases    ... and its lease is live. A live seat in the room
--                    proves the room (rooms are never removed from KEYS[1]
--                    while a seat is in them), so KEYS[1] is read only for
--                    the system's say and to tell a refusal's reason
--   GET rate, SET rate PX   the token bucket, one string with its expiry
--                    (was HMGET, HSET, PEXPIRE on a hash)
--   XADD NOMKSTREAM  the append; the stream id orders the room
--   PEXPIRE history  only when ARGV[17] asks or the XADD had to create the
--                    stream (a first message, or a history expired or lost):
--                    a history never lives without a TTL
--   SET said PX      records the say for the retries above
--   PUBLISH          the delivery, inside the script so ids come in order
--   ZCOUNT rest      HasREST: whether the room's REST users are to be
--                    marked for polling; O(log N), no node knows it
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
local now = tonumber(ARGV[3])
if ARGV[16] == 'system' then
  if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
    return {-1}
  end
else
  local at = redis.call('ZSCORE', KEYS[2], ARGV[2])
  local exp = at and redis.call('ZSCORE', KEYS[3], ARGV[2])
  if not at or string.format('%d', tonumber(at)) ~= ARGV[1] or not exp or tonumber(exp) <= now then
    if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
      return {-1}
    end
    return {0}
  end
end
local rate = tonumber(ARGV[10])
if rate > 0 then
  -- Token bucket: a missing key is a full one; the key expires when it
  -- would be full again, so an idle sender costs no memory.
  local burst = tonumber(ARGV[11])
  local tokens, last = burst, now
  local v = redis.call('GET', KEYS[5])
  if v then
    local t, at = string.match(v, '^(%S+) (%S+)$')
    if t and at then
      tokens, last = tonumber(t), tonumber(at)
    end
  end
  tokens = math.min(burst, tokens + math.max(0, now - last) * rate / 1000)
  if tokens < 1 then
    return {-2, math.ceil((1 - tokens) * 1000 / rate)}
  end
  tokens = tokens - 1
  redis.call('SET', KEYS[5], tostring(tokens) .. ' ' .. string.format('%d', math.max(now, last)),
    'PX', math.max(1, math.ceil((burst - tokens) * 1000 / rate)))
end
local id = redis.call('XADD', KEYS[4], 'NOMKSTREAM', 'MAXLEN', '~', ARGV[4], '*',
  'from', ARGV[2], 'text', ARGV[5], 'ts', ARGV[3])
local fresh = ARGV[17] == '1'
if not id then
  id = redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], '*',
    'from', ARGV[2], 'text', ARGV[5], 'ts', ARGV[3])
  fresh = true
end
-- The sender is seated (or the system spoke): the lobby is not idle, and
-- its keys (the room counter among them) expire no sooner than this, but
-- for the throttle (ARGV[17]): at most IdleTTL/48 sooner.
if fresh then
  redis.call('PEXPIRE', KEYS[4], ARGV[12])
end
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
