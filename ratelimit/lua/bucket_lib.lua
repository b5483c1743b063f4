-- bucket_lib.lua: a token bucket held in one string, the one bucket of
-- chatd: prepended to the Limiter's own script (bucket_take.lua) and to
-- the scripts that take a token with their own writes (a say, a direct
-- message; ratelimit.BucketLua), so its arithmetic exists once.
--
-- take_token(key, now, rate, burst[, slack]): the bucket at key is
-- "<tokens> <at ms>"; a missing key is a full one. It refills the bucket
-- to now at rate tokens a second (up to burst) and takes one token: 0 when
-- it did, or the ms until a token is there again when the bucket is
-- empty (nothing written then). A clock behind the bucket's (another
-- node's is ahead) refills nothing and never moves it back. The key
-- expires slack ms (default 0) after the bucket would be full again — a
-- full bucket and no bucket are the same — so an idle sender costs no
-- memory. GET, then SET PX.
local function take_token(key, now, rate, burst, slack)
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
  -- Whole numbers are written with %d: tostring and a number given to
  -- redis.call format with %.14g, the floating-point path of sprintf, a
  -- cost a say paid twice here. The text is the same ("4" either way).
  local t = tokens == math.floor(tokens) and string.format('%d', tokens) or tostring(tokens)
  redis.call('SET', key, t .. ' ' .. string.format('%d', math.max(now, last)),
    'PX', string.format('%d', math.max(1, math.ceil((burst - tokens) * 1000 / rate) + (slack or 0))))
  return 0
end
