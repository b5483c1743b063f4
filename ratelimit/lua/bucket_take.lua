-- bucket_take.lua: take one token from a key's bucket (take_token of
-- bucket_lib.lua, prepended: the Limiter's bucket is the one the send
-- scripts use).
--
-- KEYS[1]  the bucket, a STRING "<tokens> <at ms>"   (prefix:{user:U}:bucket)
-- ARGV[1]  now, in milliseconds (the caller's clock)
-- ARGV[2]  rate, tokens per second (> 0, may be fractional)
-- ARGV[3]  burst, the bucket's capacity (>= 1)
-- ARGV[4]  slack, milliseconds the key outlives the moment it would be full
--
-- Returns {allowed, retry_ms}: allowed is 1 when a token was taken, else 0 and
-- retry_ms is how long until the next token (rounded up).
local wait = take_token(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]))
if wait == 0 then
  return {1, 0}
end
return {0, wait}
