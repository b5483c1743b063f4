-- seat_renew.lua: extend the leases of many seats of one lobby with two
-- commands per room however many seats it renews: ZRANGEBYSCORE for an
-- expired seat (rare: then the room is reaped) and ZADD XX GT CH. Only when
-- fewer seats changed than were asked for does ZMSCORE say which are gone.
-- Run with lobby_lib.lua prepended.
--
-- KEYS[1]  users  HASH  user -> room number
-- KEYS[2]  open   ZSET  rooms that may have a free seat
-- KEYS[3]  due    ZSET  room number -> lower bound of earliest lease expiry
-- KEYS[4]  seats  prefix of the rooms' seat ZSETs (lobby hash tag)
-- ARGV[1]  now, unix ms
-- ARGV[2]  new lease expiry, unix ms
-- ARGV[3]  lobby name
-- ARGV[4]  channel prefix
-- ARGV[5..]  room number, user, room number, user, ...
--
-- Returns the 1-based positions of the pairs whose seat is gone (never
-- held, freed, or expired), ascending; an expired one is reaped now ("left"
-- published). A live seat's expiry only grows.
local L = {users = KEYS[1], open = KEYS[2], due = KEYS[3], seats = KEYS[4],
  now_s = ARGV[1], now = tonumber(ARGV[1]), lobby = ARGV[3], chan = ARGV[4]}
local exp_s = ARGV[2]

-- chunks calls fn(argv) with argv = head..., then args 1000 at a time
-- (Lua's unpack has a stack limit; 1000 keeps ZADD's pairs whole), and
-- n, the number of args in the chunk.
local function chunks(head, args, fn)
  for i = 1, #args, 1000 do
    local argv = {}
    for _, h in ipairs(head) do
      argv[#argv + 1] = h
    end
    local n = math.min(i + 999, #args) - i + 1
    for j = i, i + n - 1 do
      argv[#argv + 1] = args[j]
    end
    fn(argv, n)
  end
end

local rooms, order = {}, {}
local i = 0
for j = 5, #ARGV - 1, 2 do
  i = i + 1
  local seq = ARGV[j]
  local g = rooms[seq]
  if not g then
    g = {users = {}, pos = {}}
    rooms[seq] = g
    order[#order + 1] = seq
  end
  g.users[#g.users + 1] = ARGV[j + 1]
  g.pos[#g.pos + 1] = i
end

local lost = {}
for _, seq in ipairs(order) do
  local g = rooms[seq]
  local seats = L.seats .. seq
  -- Expired seats are not renewed: reap them first ("left" published).
  if #redis.call('ZRANGEBYSCORE', seats, '-inf', L.now_s, 'LIMIT', 0, 1) > 0 then
    lobby_reap(L, seq)
  end
  local pairs_ = {}
  for _, user in ipairs(g.users) do
    pairs_[#pairs_ + 1] = exp_s
    pairs_[#pairs_ + 1] = user
  end
  local changed = 0
  chunks({seats, 'XX', 'GT', 'CH'}, pairs_, function(argv)
    changed = changed + redis.call('ZADD', unpack(argv))
  end)
  if changed < #g.users then
    -- Some seat is gone (or already expires later): find which.
    local k = 0
    chunks({seats}, g.users, function(argv, n)
      local scores = redis.call('ZMSCORE', unpack(argv))
      for m = 1, n do
        k = k + 1
        if not scores[m] then
          lost[#lost + 1] = g.pos[k]
        end
      end
    end)
  end
end
table.sort(lost)
return lost
