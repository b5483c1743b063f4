-- window_take.lua: admit one event into a sliding window of a key, exactly:
-- at most limit events in any window of window_ms.
--
-- KEYS[1]  the log, a ZSET of event ids scored by their time in ms
--          (prefix:{user:U}:window)
-- ARGV[1]  now, in milliseconds (the caller's clock)
-- ARGV[2]  window_ms, the window's length (> 0)
-- ARGV[3]  limit, events allowed in one window (>= 1)
-- ARGV[4]  a unique id for this event
--
-- Returns {allowed, retry_ms}: allowed is 1 when the event was logged, else
-- 0 and retry_ms is how long until the oldest logged event leaves the window.
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
-- This very event logged already: the Redis client's retry of a call whose
-- answer was lost (the first copy ran). It was admitted; a second look
-- would count it against itself, and refuse the window's last event.
if redis.call('ZSCORE', KEYS[1], ARGV[4]) then
  return {1, 0}
end
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], window)
  return {1, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local retry = tonumber(oldest[2]) + window - now
if retry < 1 then
  retry = 1
end
return {0, retry}
