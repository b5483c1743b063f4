-- board_post: post a score for a player and answer the player's entry, atomically.
--
-- KEYS[1] board   ZSET   members "rev:seq:player", all with score 0 (ordered by bytes)
-- KEYS[2] players HASH   canonical player -> "rev:seq" when the member's player
--                        is the canonical name, else the whole member
-- KEYS[3] seq     STRING the board's change counter
-- KEYS[4] idem    STRING (only with an idempotency key) the first answer to
--                        the post with that key, JSON {f, m, r, c}, PX ARGV[10]
-- ARGV[1] player, canonical (names.Canonical): the hash field
-- ARGV[2] player as posted: the member's name, shown by every read
-- ARGV[3] mode: "best" (keep the higher), "incr" (add; a new player starts at 0), "set"
-- ARGV[4] hi, ARGV[5] lo: the score (the increment for incr) in thousandths, as
--         hi*1e9 + lo with 0 <= lo < 1e9. Lua numbers are doubles, exact only up
--         to 2^53, so 1e18 thousandths are handled as two base-1e9 limbs.
-- ARGV[6] unix seconds at which the board's keys expire (a period of a
--         periodic board: set on each post that changes it), "0" for none
-- ARGV[7] idle TTL in ms (a board that expires when idle: set on every post,
--         changed or not), "0" for none
--         With both "0" the board is permanent: any TTL is removed (PERSIST),
--         so a board declared permanent after it was created stops expiring.
-- ARGV[8] the most players the board may hold, "0" for no cap: a new player
--         on a full board is refused; the players on it may still post
-- ARGV[9] (with KEYS[4]) what the post is: "board\nplayer\nmode\nhi\nlo"
-- ARGV[10] (with KEYS[4]) how long the answer is kept, in ms
-- ARGV[11] "1" when the idle TTL may only lengthen the board's life (a
--          guest's post: a new board lives ARGV[7], an existing one keeps
--          a longer expiry), "0" or absent to set it
-- Returns {member, rank, changed, duplicate}: the player's member after the
--         post, its 0-based rank, 1 if the post changed the board (a new
--         score, or the player's name shown in another case), and 1 if
--         the idempotency key had been used for this very post: then
--         nothing was written and the first post's answer is returned.
-- Errors  "RANGE ..." when an incr would leave -1e15..1e15,
--         "FULL ..." when seq outgrows its 15 digits,
--         "PLAYERS <cap>" for a new player on a board at its cap,
--         "MISMATCH ..." when the idempotency key was used for another post.
--         Nothing is written then (the answer is not kept either).
--
-- rev = 1e18 - score (0..2e18) as 19 digits, so a higher score sorts first;
-- seq (15 digits) orders equal scores by who reached them first.

local B = 1000000000
local canon, shown, mode = ARGV[1], ARGV[2], ARGV[3]
local hi, lo = tonumber(ARGV[4]), tonumber(ARGV[5])
local PREFIX = 35 -- #"rev:seq"

if KEYS[4] then
  local prior = redis.call('GET', KEYS[4])
  if prior then
    local rec = cjson.decode(prior)
    if rec.f ~= ARGV[9] then
      return redis.error_reply('MISMATCH idempotency key used for another post')
    end
    return {rec.m, rec.r, rec.c, 1}
  end
end

local function decode(prefix)
  local dh = tonumber(string.sub(prefix, 1, 10))
  local dl = tonumber(string.sub(prefix, 11, 19))
  if dl > 0 then
    return B - dh - 1, B - dl
  end
  return B - dh, 0
end

local function encode(h, l)
  if l > 0 then
    return string.format('%010d%09d', B - h - 1, B - l)
  end
  return string.format('%010d%09d', B - h, 0)
end

-- The player's field and member. A field under the name as posted is one
-- written before names were canonical: it is moved to the canonical field.
local field, value = canon, redis.call('HGET', KEYS[2], canon)
if not value and shown ~= canon then
  value = redis.call('HGET', KEYS[2], shown)
  if value then
    field = shown
  end
end
local old, oldMember
if value then
  old = string.sub(value, 1, PREFIX)
  if #value == PREFIX then
    oldMember = value .. ':' .. field
  else
    oldMember = value
  end
elseif ARGV[8] ~= '0' and redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[8]) then
  return redis.error_reply('PLAYERS ' .. ARGV[8])
end

local nh, nl, changed = hi, lo, true
if old then
  local oh, ol = decode(old)
  if mode == 'best' then
    changed = hi > oh or (hi == oh and lo > ol)
  elseif mode == 'set' then
    changed = hi ~= oh or lo ~= ol
  elseif mode == 'incr' then
    changed = hi ~= 0 or lo ~= 0
    nh, nl = oh + hi, ol + lo
    if nl >= B then
      nh, nl = nh + 1, nl - B
    end
  else
    return redis.error_reply('MODE unknown mode')
  end
end

local prefix = old
if changed then
  if nh > B or (nh == B and nl > 0) or nh < -B then
    return redis.error_reply('RANGE score out of range')
  end
  local seq = redis.call('INCR', KEYS[3])
  if seq > 999999999999999 then
    return redis.error_reply('FULL board sequence exhausted')
  end
  prefix = encode(nh, nl) .. ':' .. string.format('%015d', seq)
end
local member = prefix .. ':' .. shown
-- A new score, or the same one under the name as posted now (shown as last
-- posted), or a field to move: rewrite the member and the field.
if member ~= oldMember or field ~= canon then
  changed = true
  if oldMember then
    redis.call('ZREM', KEYS[1], oldMember)
  end
  redis.call('ZADD', KEYS[1], 0, member)
  if field ~= canon then
    redis.call('HDEL', KEYS[2], field)
  end
  if shown == canon then
    redis.call('HSET', KEYS[2], canon, prefix)
  else
    redis.call('HSET', KEYS[2], canon, member)
  end
end
local rank = redis.call('ZRANK', KEYS[1], member)
-- The three keys always carry the same expiry, so they expire together: a
-- script sees them all or none (Redis freezes its clock for a script).
if ARGV[6] ~= '0' then
  if changed then
    for i = 1, 3 do
      redis.call('EXPIREAT', KEYS[i], ARGV[6])
    end
  end
elseif ARGV[7] ~= '0' then
  local idle = tonumber(ARGV[7])
  for i = 1, 3 do
    local left = redis.call('PTTL', KEYS[i])
    if ARGV[11] ~= '1' or left < 0 or left < idle then
      redis.call('PEXPIRE', KEYS[i], ARGV[7])
    end
  end
else
  for i = 1, 3 do
    redis.call('PERSIST', KEYS[i])
  end
end
local c = changed and 1 or 0
if KEYS[4] then
  redis.call('SET', KEYS[4], cjson.encode({f = ARGV[9], m = member, r = rank, c = c}), 'PX', ARGV[10])
end
return {member, rank, c, 0}
