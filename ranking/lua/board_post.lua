-- board_post: post a score for a player and answer the player's entry, atomically.
--
-- KEYS[1] board   ZSET   members "rev:seq:player", all with score 0 (ordered by bytes)
-- KEYS[2] players HASH   player -> "rev:seq" (the player's member without the name)
-- KEYS[3] seq     STRING the board's change counter
-- ARGV[1] player
-- ARGV[2] mode: "best" (keep the higher), "incr" (add; a new player starts at 0), "set"
-- ARGV[3] hi, ARGV[4] lo: the score (the increment for incr) in thousandths, as
--         hi*1e9 + lo with 0 <= lo < 1e9. Lua numbers are doubles, exact only up
--         to 2^53, so 1e18 thousandths are handled as two base-1e9 limbs.
-- ARGV[5] unix seconds at which the board's keys expire (a period of a
--         periodic board: set on each post that changes it), "0" for none
-- ARGV[6] idle TTL in ms (a board that expires when idle: set on every post,
--         changed or not), "0" for none
--         With both "0" the board is permanent: any TTL is removed (PERSIST),
--         so a board declared permanent after it was created stops expiring.
-- Returns {prefix, rank, changed}: the player's "rev:seq" after the post, its
--         0-based rank, and 1 if the post changed the board, 0 if it left the
--         score as it was (which then keeps its seq: its time).
-- Errors  "RANGE ..." when an incr would leave -1e15..1e15,
--         "FULL ..." when seq outgrows its 15 digits.
--
-- rev = 1e18 - score (0..2e18) as 19 digits, so a higher score sorts first;
-- seq (15 digits) orders equal scores by who reached them first.

local B = 1000000000
local player, mode = ARGV[1], ARGV[2]
local hi, lo = tonumber(ARGV[3]), tonumber(ARGV[4])

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

local old = redis.call('HGET', KEYS[2], player)
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
  if old then
    redis.call('ZREM', KEYS[1], old .. ':' .. player)
  end
  redis.call('ZADD', KEYS[1], 0, prefix .. ':' .. player)
  redis.call('HSET', KEYS[2], player, prefix)
end
local rank = redis.call('ZRANK', KEYS[1], prefix .. ':' .. player)
-- The three keys always carry the same expiry, so they expire together: a
-- script sees them all or none (Redis freezes its clock for a script).
if ARGV[5] ~= '0' then
  if changed then
    for i = 1, 3 do
      redis.call('EXPIREAT', KEYS[i], ARGV[5])
    end
  end
elseif ARGV[6] ~= '0' then
  for i = 1, 3 do
    redis.call('PEXPIRE', KEYS[i], ARGV[6])
  end
else
  for i = 1, 3 do
    redis.call('PERSIST', KEYS[i])
  end
end
return {prefix, rank, changed and 1 or 0}
