-- lobbies_reserve.lua: a user's index of the lobbies they may hold a seat
-- in (Config.MaxLobbiesPerUser): drop the entries Go found dead, then
-- reserve a lobby for a join unless the user is at the cap; or confirm or
-- release a reservation. Every removal and change is a compare-and-set on
-- the entry's score, so a reservation made meanwhile by another join of
-- the user is never lost.
--
-- KEYS[1]  lobbies  ZSET  lobby -> the time (ms) a join reserved it, 0 once
--                         the join seated the user (then it counts while
--                         the seat data say the seat lives)
-- ARGV[1]  now, unix ms (a reservation's score)
-- ARGV[2]  the cap: the most entries after the reservation (0: no check)
-- ARGV[3]  lobby to reserve, or "" for none
-- ARGV[4]  how long KEYS[1] lives after this call, ms
-- ARGV[5]  lobby whose reservation to confirm (score ARGV[6] -> 0), or ""
-- ARGV[6]  that reservation's score
-- ARGV[7..]  lobby, score, ...: entries to remove if their score is still that
--
-- Returns {1, entries} when ARGV[3] is reserved (an entry already there is
-- reserved again: its score becomes ARGV[1]), {0, entries} when the user is at the cap (nothing reserved),
-- {2, entries} when there was nothing to reserve.
for i = 7, #ARGV - 1, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) == tonumber(ARGV[i + 1]) then
    redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
if ARGV[5] ~= '' then
  local score = redis.call('ZSCORE', KEYS[1], ARGV[5])
  if score and tonumber(score) == tonumber(ARGV[6]) then
    redis.call('ZADD', KEYS[1], 0, ARGV[5])
  end
end
local code = 2
if ARGV[3] ~= '' then
  if redis.call('ZSCORE', KEYS[1], ARGV[3]) then
    -- Counted already: reserved again, so that no other join drops it as
    -- dead before this one has seated the user.
    redis.call('ZADD', KEYS[1], 'XX', ARGV[1], ARGV[3])
    code = 1
  else
    local n = redis.call('ZCARD', KEYS[1])
    local cap = tonumber(ARGV[2])
    if cap > 0 and n >= cap then
      return {0, n}
    end
    redis.call('ZADD', KEYS[1], ARGV[1], ARGV[3])
    code = 1
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return {code, redis.call('ZCARD', KEYS[1])}
