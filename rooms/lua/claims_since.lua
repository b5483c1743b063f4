-- claims_since.lua: since when (unix ms) no node has written to this Redis
-- a keyed say's send record without its claim, as v0.1.0 did: the time
-- the message send script may take a free claim as proof that a keyed say
-- is new (Messages.FollowClaimRecords). Run by a node whose registry shows
-- every live node keeping records in claims; the mark is deleted by any
-- node that sees one that does not.
--
-- KEYS[1]  since    STRING  the mark: unix ms (no TTL: it says what has been
--                           true of this Redis since then)
-- KEYS[2]  counter  STRING  the global message counter, in the same slot
-- ARGV[1]  now, unix ms
--
-- Returns the mark. A missing one is set: to now, or to 1 (the beginning
-- of time) when the message counter does not exist either, for then no
-- message, and no record, has been stored since Redis's data began: every
-- version counts the messages it stores (v0.1.0 in the pipeline of its
-- send, the same round trip), and a record never outlives its count.
local since = redis.call('GET', KEYS[1])
if since then
  return since
end
since = ARGV[1]
if redis.call('EXISTS', KEYS[2]) == 0 then
  since = '1'
end
redis.call('SET', KEYS[1], since)
return since
