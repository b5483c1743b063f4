-- blocks_change.lua: add a name to a user's blocks or take it out, and
-- publish the set after the change on the direct channel, for the user's
-- connections on every node: in one script, so the sets on the channel
-- come in the order of the changes.
--
-- KEYS[1]  blocks  SET  the canonical names the user blocks
-- ARGV[1]  "add" or "remove"
-- ARGV[2]  the target's canonical name
-- ARGV[3]  the set's TTL, ms, from this change (add)
-- ARGV[4]  the most names the set may hold (add)
-- ARGV[5]  the direct channel
-- ARGV[6]  the envelope's head: the user's canonical name and a newline
-- ARGV[7]  the event JSON up to the list of names: {"type":"blocks","blocks":
--
-- Returns the number of names in the set after the change; -1 when an add
-- would pass ARGV[4] (nothing is written or published).
if ARGV[1] == 'add' then
  if redis.call('SISMEMBER', KEYS[1], ARGV[2]) == 0 and redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[4]) then
    return -1
  end
  redis.call('SADD', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
else
  redis.call('SREM', KEYS[1], ARGV[2])
end
local names = redis.call('SMEMBERS', KEYS[1])
local list = '[]'
if #names > 0 then
  -- canonical names are [a-z0-9_-]: nothing to escape
  list = '["' .. table.concat(names, '","') .. '"]'
end
redis.call('PUBLISH', ARGV[5], ARGV[6] .. ARGV[7] .. list .. '}')
return #names
