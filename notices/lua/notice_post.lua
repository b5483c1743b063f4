-- Appends a notice to the capped history and publishes it, once per call.
-- Safe to run twice with the same KEYS and ARGV (go-redis sends a call again
-- when its reply is late, and the first copy may have run): the first run
-- records the notice's id under the call's own key, and a second run answers
-- that id without storing or publishing anything.
-- KEYS[1] stream   prefix:{notices:global}:stream
-- KEYS[2] posted   prefix:{notices:global}:posted:<nonce>  this call's record
-- ARGV[1] channel  the notices channel
-- ARGV[2] text
-- ARGV[3] ts       milliseconds since the epoch
-- ARGV[4] maxlen   the history cap (approximate)
-- ARGV[5] record TTL (ms)
-- Returns the stream id of the notice (the first run's, on a second run).
local posted = redis.call('GET', KEYS[2])
if posted then
  return posted
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[4], '*', 'text', ARGV[2], 'ts', ARGV[3])
redis.call('PUBLISH', ARGV[1], cjson.encode({type = 'notice', id = id, text = ARGV[2], ts = tonumber(ARGV[3])}))
redis.call('SET', KEYS[2], id, 'PX', ARGV[5])
return id
