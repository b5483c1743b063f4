-- conversation_open.lua: make a conversation's record unless it exists,
-- and keep it alive.
--
-- KEYS[1]  meta  HASH  the conversation's record (a, b, an, bn, guest)
-- ARGV[1]  a: the lower canonical name
-- ARGV[2]  b: the higher canonical name
-- ARGV[3]  an: a's name as first written
-- ARGV[4]  bn: b's name as first written
-- ARGV[5]  "1" when the opener is a guest (the record becomes a guest's
--          for good: it and the history live ARGV[7] after their last write)
-- ARGV[6]  the TTL of a registered pair's conversation, ms
-- ARGV[7]  the TTL of a guest's conversation, ms
-- ARGV[8]  the call's random id, kept in the record ("call") by the call
--          that made it
--
-- Returns {created, guest}: created 1 when this call made the record, 0
-- when it existed; guest 1 when the conversation is a guest's. A second
-- run of the call that made it (go-redis sends a late call again; the
-- first copy may have run) answers created 1 too: its caller marks the
-- new conversation for both users only then.
local created = 0
if redis.call('HSETNX', KEYS[1], 'a', ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], 'b', ARGV[2], 'an', ARGV[3], 'bn', ARGV[4], 'call', ARGV[8])
  created = 1
elseif redis.call('HGET', KEYS[1], 'call') == ARGV[8] then
  created = 1
end
if ARGV[5] == '1' then
  redis.call('HSET', KEYS[1], 'guest', '1')
end
local guest = redis.call('HGET', KEYS[1], 'guest') == '1'
if guest then
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
  return {created, 1}
end
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return {created, 0}
