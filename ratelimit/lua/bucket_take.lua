-- bucket_take.lua: take one token from a user's bucket, refilling it first.
--
-- KEYS[1]  the bucket, a HASH {tokens, ts}         (prefix:{user:U}:rate)
-- ARGV[1]  now, in milliseconds (the caller's clock)
-- ARGV[2]  rate, tokens per second (> 0, may be fractional)
-- ARGV[3]  burst, the bucket's capacity (>= 1)
-- ARGV[4]  slack, milliseconds the key outlives the moment it would be full
--
-- Returns {allowed, retry_ms}: allowed is 1 when a token was taken, else 0 and
-- retry_ms is how long until the next token (rounded up).
local now = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local slack = tonumber(ARGV[4])

local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1])
local ts = tonumber(b[2])
if tokens == nil or ts == nil then
  -- No bucket (new user, or it expired after refilling): it is full.
  tokens = burst
  ts = now
end
if now > ts then
  -- Refill for the time elapsed. A clock behind ts (another node's clock is
  -- ahead) refills nothing and never moves ts back.
  tokens = tokens + (now - ts) * rate / 1000
  ts = now
end
if tokens > burst then
  tokens = burst
end

local allowed = 0
local retry = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  retry = math.ceil((1 - tokens) * 1000 / rate)
end

redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%d', ts))
-- Once full again the bucket is the same as no bucket: let it go then.
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * 1000 / rate) + slack)
return {allowed, retry}
