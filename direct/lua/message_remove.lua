-- message_remove.lua: remove one message of a conversation (moderation)
-- and publish the removal to its pair.
--
-- KEYS[1]  log   STREAM  the conversation's messages
-- ARGV[1]  the message id, "ms-seq" (unpadded)
-- ARGV[2]  the channel
-- ARGV[3]  the payload published when the message was there
--
-- Returns 1 when the message was removed (and the removal published), 0
-- when there was no such message.
if redis.call('XDEL', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
