-- message_send.lua: take a token from the sender's bucket, append a
-- direct message to its conversation's history, count it unread for the
-- recipient, and publish it, so the ids on the channel come in history
-- order; a refused send writes nothing. The send is recorded under its
-- key first checked, so a second run with the same KEYS and ARGV (the
-- Redis client's retry of this call after a read timeout, or a client's
-- repeat with its idempotency key) answers the first run and changes
-- nothing, whatever was written in between.
--
-- KEYS[1]  log   STREAM  the conversation's messages: from, text, ts
-- KEYS[2]  meta  HASH    the conversation's record (a, b, guest, read:u, unread:u)
-- KEYS[3]  rate  STRING  the sender's bucket here: "<tokens> <at ms>"
-- KEYS[4]  said  STRING  the send recorded under its key (the sender's
--                        idempotency key, or "~<call>" for a send without
--                        one): "<stream id> <ts> <text hash> <call> <unread>"
-- ARGV[1]  the sender's canonical name
-- ARGV[2]  the recipient's canonical name
-- ARGV[3]  now, unix ms (the message's ts)
-- ARGV[4]  history cap (XADD MAXLEN ~)
-- ARGV[5]  the sender's name as written (the message's from)
-- ARGV[6]  text
-- ARGV[7]  the channel
-- ARGV[8]  the published payload up to the message id
-- ARGV[9]  the published payload after the message id
-- ARGV[10] rate, tokens per second (<= 0: no limit)
-- ARGV[11] bucket size (>= 1)
-- ARGV[12] the TTL of a registered pair's conversation, ms
-- ARGV[13] the TTL of a guest's conversation, ms
-- ARGV[14] how long KEYS[4] is kept, ms
-- ARGV[15] the text's hash (hex)
-- ARGV[16] the send call: a random id per Send call, recorded in KEYS[4]
--
-- Returns {id, unread}: the stream id "ms-seq" of the new message
-- (published zero-padded to "%013d-%06d" between ARGV[8] and ARGV[9]) and
-- the recipient's unread count after it; {-1} when the conversation does
-- not exist or is not the pair's; {-2, ms} when the bucket is empty: a
-- token is there again in ms; {-3} when KEYS[4] recorded another text;
-- {-4, id, ts, call, unread} when KEYS[4] recorded this send, which is
-- not sent again (nothing is written, published or taken): the first
-- run's message, the call that sent it and the unread count it answered.
-- A call equal to ARGV[16] is this very call run again (Redis client
-- retry: the first answer was lost); another is a client's repeat. A
-- record of an older version ("<stream id> <ts> <text hash>") answers
-- call "" and unread 0.
local said = KEYS[4]
local rec = redis.call('GET', said)
if rec then
  local f = {}
  for w in string.gmatch(rec, '%S+') do
    f[#f + 1] = w
  end
  if f[3] ~= ARGV[15] then
    return {-3}
  end
  return {-4, f[1], f[2], f[4] or '', tonumber(f[5] or '0') or 0}
end
local meta = redis.call('HMGET', KEYS[2], 'a', 'b', 'guest')
local a, b = meta[1], meta[2]
if not a or not ((a == ARGV[1] and b == ARGV[2]) or (a == ARGV[2] and b == ARGV[1])) then
  return {-1}
end
local now = tonumber(ARGV[3])
local rate = tonumber(ARGV[10])
if rate > 0 then
  local wait = take_token(KEYS[3], now, rate, tonumber(ARGV[11]))
  if wait > 0 then
    return {-2, wait}
  end
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[4], '*', 'from', ARGV[5], 'text', ARGV[6], 'ts', ARGV[3])
local unread = redis.call('HINCRBY', KEYS[2], 'unread:' .. ARGV[2], 1)
local ttl = ARGV[12]
if meta[3] == '1' then
  ttl = ARGV[13]
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('SET', said, id .. ' ' .. ARGV[3] .. ' ' .. ARGV[15] .. ' ' .. ARGV[16] .. ' ' .. unread, 'PX', ARGV[14])
local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
local padded = string.rep('0', 13 - #ms) .. ms .. '-' .. string.rep('0', 6 - #seq) .. seq
redis.call('PUBLISH', ARGV[7], ARGV[8] .. padded .. ARGV[9])
return {id, unread}
