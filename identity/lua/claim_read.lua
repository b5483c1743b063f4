-- claim_read.lua: who holds a name and for how long, read together (a GET
-- and a PTTL sent apart could straddle the expiry).
--
-- KEYS[1]  claim key  STRING  the holding session's id, PX ttl
--
-- Returns {session, pttl in ms} when the name is held; false when it is free.
local holder = redis.call('GET', KEYS[1])
if not holder then
  return false
end
return {holder, redis.call('PTTL', KEYS[1])}
