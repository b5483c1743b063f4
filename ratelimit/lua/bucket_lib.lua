-- bucket_lib.lua: a token bucket held in one string, for scripts that take
-- a token with their own writes (a say, a direct message): prepended to
-- them (ratelimit.BucketLua), so the bucket's arithmetic exists once.
--
-- take_token(key, now, rate, burst): the bucket at key is
-- "<tokens> <at ms>"; a missing key is a full one. It refills the bucket
-- to now at rate tokens a second (up to burst) and takes one token: 0 when
-- it did, or the ms until a token is there again when the bucket is
-- empty (nothing written then). The key expires when the bucket would be
-- full again, so an idle sender costs no memory. GET, then SET PX.
local function take_token(key, now, rate, burst)
  local tokens, last = burst, now
  local v = redis.call('GET', key)
  if v then
    local t, at = string.match(v, '^(%S+) (%S+)$')
    if t and at then
      tokens, last = tonumber(t), tonumber(at)
    end
  end
  tokens = math.min(burst, tokens + math.max(0, now - last) * rate / 1000)
  if tokens < 1 then
    return math.ceil((1 - tokens) * 1000 / rate)
  end
  tokens = tokens - 1
  redis.call('SET', key, tostring(tokens) .. ' ' .. string.format('%d', math.max(now, last)),
    'PX', math.max(1, math.ceil((burst - tokens) * 1000 / rate)))
  return 0
end
