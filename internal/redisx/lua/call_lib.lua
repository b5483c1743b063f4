-- call_lib.lua: the record of one call's answer (a number), for scripts
-- that are not safe to run twice as they are: go-redis sends a late call
-- again, and the first copy may have run (see CallRecordTTL in call.go).
-- Such a script looks its call up first and answers the record when there
-- is one; else it records what it answers. Prepended in Go
-- (redisx.CallRecordLua); the record's key comes in KEYS, named by the
-- call's id (redisx.CallID).

-- call_recorded returns what the call recorded under key answered, or nil
-- when it has not run.
local function call_recorded(key)
  local v = redis.call('GET', key)
  if v then
    return tonumber(v)
  end
  return nil
end

-- call_answer records code under key for ttl ms and returns it.
local function call_answer(key, code, ttl)
  redis.call('SET', key, code, 'PX', ttl)
  return code
end
