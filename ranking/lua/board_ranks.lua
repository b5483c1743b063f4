-- board_ranks: the entries of many players in one round trip, as one snapshot.
--
-- KEYS[1] board   ZSET members "rev:seq:player", all with score 0
-- KEYS[2] players HASH player -> "rev:seq"
-- ARGV    the players, at least one
-- Returns a flat array, two items per player in ARGV order: its "rev:seq" and
--         its 0-based rank, or "" and -1 for a player not on the board.

local prefixes = redis.call('HMGET', KEYS[2], unpack(ARGV))
local out = {}
for i = 1, #ARGV do
  local pre = prefixes[i]
  local rank = false
  if pre then
    rank = redis.call('ZRANK', KEYS[1], pre .. ':' .. ARGV[i])
  end
  if rank then
    out[#out + 1] = pre
    out[#out + 1] = rank
  else
    out[#out + 1] = ''
    out[#out + 1] = -1
  end
end
return out
