-- settings_write.lua: change one setting, bump the version, announce it.
--
-- KEYS[1]  the values HASH            (prefix:{settings:live}:values)
-- KEYS[2]  the version counter STRING (prefix:{settings:live}:version)
-- KEYS[3]  the change channel         (prefix:{settings:live}:changes)
-- ARGV[1]  op: "set" or "delete"
-- ARGV[2]  the setting's key
-- ARGV[3]  for "set": the value's canonical JSON (validated by the caller)
--
-- Returns the new version. Publishes
--   {"key":K,"value":V|null,"version":N,"op":"set"|"delete"}
-- in the same atomic step, so the version order is the publish order.
local value = 'null'
if ARGV[1] == 'set' then
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
  value = ARGV[3]
else
  redis.call('HDEL', KEYS[1], ARGV[2])
end
local version = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', KEYS[3], '{"key":' .. cjson.encode(ARGV[2]) .. ',"value":' .. value ..
  ',"version":' .. string.format('%d', version) .. ',"op":"' .. ARGV[1] .. '"}')
return version
