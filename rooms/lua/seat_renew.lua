-- seat_renew.lua: extend many attachments of one lobby, and the leases of
-- the seats they hold, with a few commands per 1,000 attachments: HMGET
-- users, ZMSCORE seats, HMGET atts, then HSET atts and ZADD XX GT seats in
-- bulk. An attachment that is not recorded is never created here, and the
-- seat of a user none of whose listed attachments is recorded is not
-- touched. Run with lobby_lib.lua prepended.
--
-- KEYS[1..12]  the lobby's keys, see lobby_lib.lua
-- ARGV[1..7]   see lobby_lib.lua (ARGV[2]: the new expiry)
-- ARGV[8..]  room number, user, attachment id, ...: triples
--
-- Returns {lost, idle, online, rooms, stamp, changed}: lost the 1-based
-- positions of the triples whose attachment is gone (never attached,
-- detached, expired, or its seat is gone or in another room), ascending;
-- idle 1 when the lobby has no seat left (rooms with an expired seat are
-- reaped first, "left" published); then the lobby's count (lobby_count in
-- lobby_lib.lua).
local L = lobby_args(KEYS, ARGV)

-- chunks calls fn(argv, i, n) with argv = head..., then args[i..i+n-1],
-- 1000 at a time (Lua's unpack has a stack limit; 1000 keeps pairs whole).
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
    fn(argv, i, n)
  end
end

-- Group the triples by room, then by user.
local rooms, order = {}, {}
local k = 0
for j = 8, #ARGV - 2, 3 do
  k = k + 1
  local seq, user, id = ARGV[j], ARGV[j + 1], ARGV[j + 2]
  local g = rooms[seq]
  if not g then
    g = {users = {}, byuser = {}}
    rooms[seq] = g
    order[#order + 1] = seq
  end
  local u = g.byuser[user]
  if not u then
    u = {}
    g.byuser[user] = u
    g.users[#g.users + 1] = user
  end
  u[#u + 1] = {id, k}
end

local lost = {}
for _, seq in ipairs(order) do
  local g = rooms[seq]
  local seats = L.seats .. seq
  -- Expired seats are not renewed: reap them first ("left" published).
  if #redis.call('ZRANGEBYSCORE', seats, '-inf', L.now_s, 'LIMIT', 0, 1) > 0 then
    lobby_reap(L, seq)
  end
  local where, score, raw = {}, {}, {}
  chunks({L.users}, g.users, function(argv, i, n)
    local v = redis.call('HMGET', unpack(argv))
    for m = 1, n do where[i + m - 1] = v[m] end
  end)
  chunks({seats}, g.users, function(argv, i, n)
    local v = redis.call('ZMSCORE', unpack(argv))
    for m = 1, n do score[i + m - 1] = v[m] end
  end)
  chunks({L.atts}, g.users, function(argv, i, n)
    local v = redis.call('HMGET', unpack(argv))
    for m = 1, n do raw[i + m - 1] = v[m] end
  end)
  local hset, zadd = {}, {}
  for i, user in ipairs(g.users) do
    local held = where[i] == seq and score[i] and tonumber(score[i]) > L.now
    local a, n, rest, dropped = {}, 0, false, false
    if held then
      a, n, _, rest, dropped = atts_decode(L, raw[i])
    end
    local renewed = false
    for _, e in ipairs(g.byuser[user]) do
      local v = a[e[1]]
      if v then
        v[1] = L.exp
        renewed = true
      else
        lost[#lost + 1] = e[2]
      end
    end
    if n > 0 and (renewed or dropped) then
      hset[#hset + 1] = user
      hset[#hset + 1] = cjson.encode(a)
      if dropped and not rest then
        redis.call('SREM', L.rest .. seq, user)
      end
    end
    if renewed then
      zadd[#zadd + 1] = L.exp_s
      zadd[#zadd + 1] = user
    end
  end
  chunks({L.atts}, hset, function(argv)
    redis.call('HSET', unpack(argv))
  end)
  chunks({seats, 'XX', 'GT'}, zadd, function(argv)
    redis.call('ZADD', unpack(argv))
  end)
end
table.sort(lost)
local f = lobby_finish(L)
return {lost, f[2], f[3], f[4], f[5], f[6]}
