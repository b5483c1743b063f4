-- board_ranks: the entries of many players in one round trip, as one snapshot.
--
-- KEYS[1] board   ZSET members "rev:seq:player", all with score 0
-- KEYS[2] players HASH canonical player -> "rev:seq", or the whole member
--                 when its player is shown otherwise than canonically
-- ARGV    the players, canonical, at least one
-- Returns a flat array, two items per player in ARGV order: its member and
--         its 0-based rank, or "" and -1 for a player not on the board.

local values = redis.call('HMGET', KEYS[2], unpack(ARGV))
local out = {}
for i = 1, #ARGV do
  local v = values[i]
  local member, rank = false, false
  if v then
    if #v == 35 then
      member = v .. ':' .. ARGV[i]
    else
      member = v
    end
    rank = redis.call('ZRANK', KEYS[1], member)
  end
  if rank then
    out[#out + 1] = member
    out[#out + 1] = rank
  else
    out[#out + 1] = ''
    out[#out + 1] = -1
  end
end
return out
