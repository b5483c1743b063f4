-- fence_check.lua: the fencing guard, a Lua function to prepend to a script
-- that writes keys protected by a lock (exported as lock.FenceCheckLua).
--
-- fence_is_current(fence_key, fence)
--   fence_key  the lock's fence key, passed in KEYS (same hash tag as the
--              keys the script writes)
--   fence      the caller's fence number as a decimal string, from ARGV
--
-- Returns true when no fence newer than `fence` has been issued for the
-- lock, i.e. no other holder has acquired it since.
local function fence_is_current(fence_key, fence)
  return redis.call('GET', fence_key) == fence
end
