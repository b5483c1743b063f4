-- Appends a notice to the capped history and publishes it.
-- KEYS[1] stream   prefix:{notices:global}:stream
-- ARGV[1] channel  the notices channel
-- ARGV[2] text
-- ARGV[3] ts       milliseconds since the epoch
-- ARGV[4] maxlen   the history cap (approximate)
-- Returns the stream id of the notice.
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[4], '*', 'text', ARGV[2], 'ts', ARGV[3])
redis.call('PUBLISH', ARGV[1], cjson.encode({type = 'notice', id = id, text = ARGV[2], ts = tonumber(ARGV[3])}))
return id
