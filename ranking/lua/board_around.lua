-- board_around: a player's neighbourhood on the board, as one snapshot.
--
-- KEYS[1] board   ZSET members "rev:seq:player", all with score 0
-- KEYS[2] players HASH canonical player -> "rev:seq", or the whole member
--                 when its player is shown otherwise than canonically
-- ARGV[1] player, canonical
-- ARGV[2] radius: how many entries above and below (clipped at the ends)
-- Returns {first, member...}: the rank of the first member and the members
--         from there, best first; {} when the player is not on the board.

local v = redis.call('HGET', KEYS[2], ARGV[1])
if not v then
  return {}
end
local member = v
if #v == 35 then
  member = v .. ':' .. ARGV[1]
end
local rank = redis.call('ZRANK', KEYS[1], member)
if not rank then
  return {}
end
local radius = tonumber(ARGV[2])
local first = rank - radius
if first < 0 then
  first = 0
end
local out = redis.call('ZRANGE', KEYS[1], first, rank + radius)
table.insert(out, 1, first)
return out
