-- bucket_lib.lua: a token bucket held in one string, the one bucket of
-- chatd: prepended to the Limiter's own script (bucket_take.lua) and to
-- the scripts that take a token with their own writes (a say, a direct
-- message; ratelimit.BucketLua), so its arithmetic exists once.
--
-- take_token(key, now, rate, burst[, slack]): the bucket at key is
-- "<tokens> <at ms>"; a missing key is a full one. It refills the bucket
-- to now at rate tokens a second (up to burst) and takes one token: 0 when
-- it did, or the ms until a token is there again when the bucket is
-- empty (nothing written then). A clock behind the bucket's
-- (another node's is ahead) refills nothing and never moves it back. The
-- key expires slack ms (default 0) after the bucket would be full again —
-- a full bucket and no bucket are the same — so an idle sender costs no
-- memory.
--
-- One SET NX GET in the usual case, a sender whose bucket has filled up
-- and expired since its last message: it writes a full bucket less the
-- token when there is none, and otherwise writes nothing and answers the
-- bucket, which is then refilled and written (or, empty, left as it is)
-- as before. Against a GET and then a SET PX, that is one command fewer
-- for most messages and as many for the others, with the same bucket
-- afterwards either way.
local function bucket_text(tokens, at)
  -- Whole numbers are written with %d: tostring and a number given to
  -- redis.call format with %.14g, the floating-point path of sprintf. The
  -- text is the same ("4" either way).
  if tokens == math.floor(tokens) then
    return string.format('%d %d', tokens, at) -- one string made, not three
  end
  return tostring(tokens) .. ' ' .. string.format('%d', at)
end
local function bucket_px(tokens, rate, burst, slack)
  return string.format('%d', math.max(1, math.ceil((burst - tokens) * 1000 / rate) + (slack or 0)))
end
local function take_token(key, now, rate, burst, slack)
  local v
  if burst >= 1 then
    v = redis.call('SET', key, bucket_text(burst - 1, now), 'PX', bucket_px(burst - 1, rate, burst, slack), 'NX', 'GET')
    if not v then
      return 0 -- there was no bucket: a full one, less this token, is written
    end
  else
    v = redis.call('GET', key)
  end
  local tokens, last = burst, now
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
  redis.call('SET', key, bucket_text(tokens, math.max(now, last)), 'PX', bucket_px(tokens, rate, burst, slack))
  return 0
end
