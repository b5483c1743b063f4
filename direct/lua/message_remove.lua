-- message_remove.lua: remove one message of a conversation (moderation)
-- and publish the removal to its pair. Run with redisx's call_lib.lua
-- prepended.
--
-- KEYS[1]  log     STREAM  the conversation's messages
-- KEYS[2]  record  STRING  what this call answered, kept ARGV[4] ms
-- ARGV[1]  the message id, "ms-seq" (unpadded)
-- ARGV[2]  the channel
-- ARGV[3]  the payload published when the message was there
-- ARGV[4]  how long the record is kept, ms
--
-- Returns 1 when the message was removed (and the removal published), 0
-- when there was no such message. A second run of the same call (go-redis
-- sends a late call again; the first copy may have run) answers what the
-- first answered and changes nothing.
local done = call_recorded(KEYS[2])
if done then
  return done
end
if redis.call('XDEL', KEYS[1], ARGV[1]) == 0 then
  return call_answer(KEYS[2], 0, ARGV[4])
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return call_answer(KEYS[2], 1, ARGV[4])
