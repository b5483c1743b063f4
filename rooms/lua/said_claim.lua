-- said_claim.lua: bind a sender's idempotency key to one message (its room
-- and text) across every lobby. The send script's own record (KEYS[7] of
-- message_send.lua) lives in the lobby's slot, so it cannot see the same
-- key used in another lobby; this claim, in the user's slot, can. It runs
-- before the send, in its own round trip: a key bound to another message is
-- refused before anything is written.
--
-- KEYS[1]  claim  STRING  "<room> <text hash>" of the message the key sent
-- ARGV[1]  "<room> <text hash>" of this say
-- ARGV[2]  how long the claim is kept, ms (the send record's TTL)
--
-- Returns 1 when the key is bound to this message (now, or by an earlier
-- call: a retry), 0 when it is bound to another room's or text's message.
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if v == ARGV[1] then
  return 1
end
return 0
