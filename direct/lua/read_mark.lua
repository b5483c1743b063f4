-- read_mark.lua: mark a conversation read by one participant up to a
-- message, and count what the other one wrote after it.
--
-- KEYS[1]  meta  HASH    the conversation's record (a, b, read:u, unread:u)
-- KEYS[2]  log   STREAM  the conversation's messages
-- ARGV[1]  the reader's canonical name
-- ARGV[2]  the message id read up to, "ms-seq" (unpadded)
-- ARGV[3]  the most entries counted (the history's cap)
--
-- Returns {unread, read}: the reader's unread count after the mark and the
-- id read up to (a mark never goes back: an older id keeps the newer
-- mark); {-1} when the conversation does not exist or the reader is not
-- one of its pair.
local meta = redis.call('HMGET', KEYS[1], 'a', 'b', 'read:' .. ARGV[1])
if not meta[1] or (meta[1] ~= ARGV[1] and meta[2] ~= ARGV[1]) then
  return {-1}
end
local function parse(id)
  local ms, seq = string.match(id or '', '^(%d+)%-(%d+)$')
  if not ms then
    return nil
  end
  return {tonumber(ms), tonumber(seq)}
end
local want, have = parse(ARGV[2]), parse(meta[3])
local read = ARGV[2]
if have and (not want or have[1] > want[1] or (have[1] == want[1] and have[2] >= want[2])) then
  read = meta[3]
end
local unread = 0
local rows = redis.call('XRANGE', KEYS[2], '(' .. read, '+', 'COUNT', ARGV[3])
for _, row in ipairs(rows) do
  local f = row[2]
  for i = 1, #f, 2 do
    if f[i] == 'from' and string.lower(f[i + 1]) ~= ARGV[1] then
      unread = unread + 1
    end
  end
end
redis.call('HSET', KEYS[1], 'read:' .. ARGV[1], read, 'unread:' .. ARGV[1], unread)
return {unread, read}
